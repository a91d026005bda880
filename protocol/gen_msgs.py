#!/usr/bin/env python3
"""
gen_msgs.py — generates the Kafka message codec (kp_msgs.h, kp_msgs.c) from
the JSON message definitions in protocol/messages/, as Kafka generates its
request and response classes.  A new API version is a data change: copy the
newer JSON file, rebuild.

    python3 protocol/gen_msgs.py [--name kp_msgs] OUT_DIR protocol/messages/*.json
    python3 protocol/gen_msgs.py --name kp_records OUT_DIR protocol/records/*.json

The second form reads the record schemas of Kafka's internal topics
("type": "coordinator-key" or "data", e.g. OffsetCommitKey/Value of
__consumer_offsets) in the same dialect.  Such a record is an INT16
version followed by the struct; for a key that INT16 is the record type
(the JSON's apiKey), emitted as KP_RECORD_TYPE_<Name>.

--name picks the output files (NAME.h, NAME.c) and the descriptor table
(kp_msg_descs for the default, NAME_descs otherwise), so a test can
generate schemas of its own beside libkp's.

What is generated, per message M (ProduceRequest, RequestHeader, ...):
  - struct kp_M, and kp_M_S for every nested struct S, with the spec's field
    names.  Scalars map to C integers / bool / double, uuid to uint8_t[16],
    string/bytes/records to kp_str (a slice; len -1 = null), an array F to
    a pointer F plus int32_t F_count (-1 = null array), a struct to an
    embedded struct, a nullable struct to a pointer (NULL = null).
  - kp_init_M: every field at its JSON default ("default", else 0, "",
    empty array).
  - kp_dec_M(kp_rd *, version, kp_M *, kp_arena *) and
    kp_enc_M(kp_buf *, version, const kp_M *), covering every valid version.
  - a descriptor per message (kp_msg_descs[]: API key, valid and flexible
    versions, size, type-erased init/dec/enc) for ApiVersions and for tools
    that walk every message (the fuzz target).

Semantics, as in Kafka's generated Java code:
  G1. A field is on the wire only in its "versions"; a tagged field only in
      the tagged section of its "taggedVersions".  Decoding leaves an absent
      field at its default.  Encoding a non-ignorable field that the version
      cannot carry, holding a non-default value, fails with KP_E_VERSION.
  G2. Null is accepted (decode) and written (encode) only in
      "nullableVersions"; elsewhere it is KP_E_MALFORMED.
  G3. Flexible versions use compact strings/bytes/arrays and end every struct
      with a tagged section; a field's own "flexibleVersions" overrides the
      message's (RequestHeader.ClientId: "none").
  G4. A tagged field is written only when it differs from its default;
      known tags are decoded into the struct, unknown tags are skipped.
  G5. Every array count is bounded by the bytes left divided by the smallest
      wire size of one element at that version (computed here), before the
      arena is asked for memory.

Unsupported schema features (an unknown type, an array of records) stop the
generator with an error rather than produce a codec that is silently wrong.
Only the standard library is used.
"""
import json
import os
import re
import sys

NOVER = 0x7FFF  # "N+" upper bound

SCALARS = {
    # type: (C type, reader, writer, wire size)
    "int8": ("int8_t", "kp_rd_i8({r})", "kp_wr_i8({b}, {x})", 1),
    "int16": ("int16_t", "kp_rd_i16({r})", "kp_wr_i16({b}, {x})", 2),
    "uint16": ("uint16_t", "(uint16_t)kp_rd_i16({r})", "kp_wr_i16({b}, (int16_t){x})", 2),
    "int32": ("int32_t", "kp_rd_i32({r})", "kp_wr_i32({b}, {x})", 4),
    "uint32": ("uint32_t", "kp_rd_u32({r})", "kp_wr_u32({b}, {x})", 4),
    "int64": ("int64_t", "kp_rd_i64({r})", "kp_wr_i64({b}, {x})", 8),
    "float64": ("double", "kp_msg_rd_f64({r})", "kp_msg_wr_f64({b}, {x})", 8),
    "bool": ("bool", "kp_rd_bool({r})", "kp_wr_bool({b}, {x})", 1),
}
SLICES = ("string", "bytes", "records")


class SchemaError(Exception):
    pass


def parse_versions(s, what):
    """'3+', '0-5', '7', 'none' -> (lo, hi) or None."""
    if s is None:
        raise SchemaError("%s: missing versions" % what)
    s = str(s).strip()
    if s == "none":
        return None
    m = re.fullmatch(r"(\d+)\+", s)
    if m:
        return (int(m.group(1)), NOVER)
    m = re.fullmatch(r"(\d+)-(\d+)", s)
    if m:
        return (int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"(\d+)", s)
    if m:
        return (int(s), int(s))
    raise SchemaError("%s: bad version range %r" % (what, s))


def intersect(a, b):
    if a is None or b is None:
        return None
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else None


def in_range(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def cond(rng, valid, var="v"):
    """C condition for 'var in rng', simplified against the valid range."""
    if rng is None:
        return "false"
    rng = intersect(rng, valid)
    if rng is None:
        return "false"
    parts = []
    if rng[0] > valid[0]:
        parts.append("%s >= %d" % (var, rng[0]))
    if rng[1] < valid[1]:
        parts.append("%s <= %d" % (var, rng[1]))
    return " && ".join(parts) if parts else "true"


def strip_comments(text):
    return "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))


class Field:
    def __init__(self, d, msg, parent_versions):
        self.name = d["name"]
        self.type = d["type"]
        what = "%s.%s" % (msg.name, self.name)
        # A tagged field may leave out "versions": they are its taggedVersions
        # (Kafka's generator; TransactionLogValue's tagged fields do).
        vers = d.get("versions", d.get("taggedVersions") if "tag" in d else None)
        self.versions = intersect(parse_versions(vers, what), parent_versions)
        self.nullable = parse_versions(d.get("nullableVersions", "none"), what)
        self.ignorable = bool(d.get("ignorable", False))
        self.tag = int(d["tag"]) if "tag" in d else None
        self.tagged = parse_versions(d.get("taggedVersions", "none"), what) if self.tag is not None else None
        if self.tag is not None and self.tagged is None:
            raise SchemaError("%s: tag without taggedVersions" % what)
        self.flex_override = (parse_versions(d["flexibleVersions"], what)
                              if "flexibleVersions" in d else "inherit")
        self.default = d.get("default")
        self.is_array = self.type.startswith("[]")
        self.elem = self.type[2:] if self.is_array else self.type
        self.struct = None
        if self.elem not in SCALARS and self.elem not in SLICES and self.elem != "uuid":
            if not self.elem[:1].isupper():
                raise SchemaError("%s: unknown type %s" % (what, self.type))
            self.struct = msg.struct_for(self.elem, d.get("fields"), self.versions)
        # A nullable struct is a pointer (NULL: null), preceded on the wire
        # by an INT8 marker (-1 null, 1 present) in its nullableVersions.
        self.nullable_struct = bool(self.struct) and not self.is_array and self.nullable is not None
        if self.elem == "records" and self.is_array:
            raise SchemaError("%s: array of records" % what)

    def wire_versions(self):
        """Versions in which the field sits in the fixed (untagged) part."""
        if self.tag is None:
            return self.versions
        return None

    def tag_versions(self):
        if self.tag is None:
            return None
        return intersect(self.versions, self.tagged)


class Struct:
    def __init__(self, msg, name, cname, fields_json, versions):
        self.msg = msg
        self.name = name
        self.cname = cname
        self.versions = versions
        self.fields = []
        self.fields_json = fields_json

    def build(self):
        self.fields = [Field(f, self.msg, self.versions) for f in self.fields_json]
        tags = [f.tag for f in self.fields if f.tag is not None]
        if len(tags) != len(set(tags)):
            raise SchemaError("%s.%s: duplicate tag" % (self.msg.name, self.name))


class Message:
    def __init__(self, d, path):
        self.d = d
        self.name = d["name"]
        self.kind = d["type"]
        self.api_key = d.get("apiKey", -1)
        self.valid = parse_versions(d["validVersions"], self.name)
        self.flex = parse_versions(d.get("flexibleVersions", "none"), self.name)
        self.first_flex = self.flex[0] if self.flex else NOVER
        self.structs = []           # in definition order, nested first
        self.by_name = {}
        self.common = {c["name"]: c for c in d.get("commonStructs", [])}
        self.top = Struct(self, self.name, "kp_" + self.name, d["fields"], self.valid)
        self.top.build()
        self.structs.append(self.top)

    def struct_for(self, name, fields_json, versions):
        if name in self.by_name:
            if fields_json is not None:
                raise SchemaError("%s: struct %s defined twice" % (self.name, name))
            s = self.by_name[name]
            if s.versions is not None and versions is not None:
                s.versions = (min(s.versions[0], versions[0]), max(s.versions[1], versions[1]))
            return s
        if fields_json is None:
            if name not in self.common:
                raise SchemaError("%s: struct %s has no fields" % (self.name, name))
            fields_json = self.common[name]["fields"]
            versions = self.valid       # common structs carry absolute versions
        s = Struct(self, name, "kp_%s_%s" % (self.name, name), fields_json, versions)
        self.by_name[name] = s
        s.build()
        self.structs.append(s)
        return s


def is_flex(msg, v):
    return in_range(msg.flex, v)


def field_flex(msg, f, v):
    if f.flex_override == "inherit":
        return is_flex(msg, v)
    return is_flex(msg, v) and in_range(f.flex_override, v)


def elem_min(msg, f, v, flex):
    t = f.elem
    if f.nullable_struct:
        return 0                     # a lower bound: null is one byte, or less in no version
    if f.struct:
        return struct_min(msg, f.struct, v)
    if t in SCALARS:
        return SCALARS[t][3]
    if t == "uuid":
        return 16
    if t == "string":
        return 1 if flex else 2
    return 1 if flex else 4


def struct_min(msg, s, v):
    flex = is_flex(msg, v)
    n = 1 if flex else 0
    for f in s.fields:
        if not in_range(f.wire_versions(), v):
            continue
        ff = field_flex(msg, f, v)
        if f.is_array:
            n += 1 if ff else 4
        else:
            n += elem_min(msg, f, v, ff)
    return n


# ---- C emission ---------------------------------------------------------------

def c_int_literal(t, val):
    if isinstance(val, bool):
        return "true" if val else "false"
    s = str(val).strip()
    if t == "bool":
        if s not in ("true", "false"):
            raise SchemaError("bad bool default %r" % val)
        return s
    if t == "float64":
        return repr(float(s))
    n = int(s, 0)
    if t == "int64":
        if n == -(1 << 63):
            return "INT64_MIN"
        return "INT64_C(%d)" % n
    if t == "int32" and n == -(1 << 31):
        return "INT32_MIN"
    return str(n)


def c_str_literal(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def slice_default(f):
    """(init expression, is-default condition on X) for a string/bytes/records field."""
    d = f.default
    if d == "null" or (d is None and f.elem == "records"):
        return "KP_STR_NULL", "{x}.len < 0"
    if d is None or d == "":
        return '((kp_str){ "", 0 })', "{x}.len == 0"
    if f.elem != "string":
        raise SchemaError("%s: non-empty bytes default" % f.name)
    lit = c_str_literal(d)
    return ('((kp_str){ %s, %d })' % (lit, len(d.encode())),
            "kp_str_eq({x}, %s)" % lit)


class Gen:
    def __init__(self, msgs, name="kp_msgs"):
        self.msgs = msgs
        self.name = name
        self.table = "kp_msg_descs" if name == "kp_msgs" else name + "_descs"
        self.h = []
        self.c = []

    # -- header --
    def emit_struct_decl(self, msg, s):
        out = self.h
        out.append("struct %s {" % s.cname)
        if not s.fields:
            out.append("    char _unused;           /* no fields */")
        for f in s.fields:
            if f.nullable_struct:
                out.append("    struct %s *%s;        /* NULL: null */" % (f.struct.cname, f.name))
                continue
            if f.struct:
                ct = "struct %s" % f.struct.cname
            elif f.elem in SCALARS:
                ct = SCALARS[f.elem][0]
            elif f.elem == "uuid":
                ct = None
            else:
                ct = "kp_str"
            if f.is_array:
                if ct is None:
                    out.append("    uint8_t (*%s)[16];" % f.name)
                else:
                    out.append("    %s *%s;" % (ct, f.name))
                out.append("    int32_t %s_count;        /* -1: null */" % f.name)
            elif ct is None:
                out.append("    uint8_t %s[16];" % f.name)
            else:
                out.append("    %s %s;" % (ct, f.name))
        out.append("};")
        out.append("")

    # -- per-field helpers --
    def value_stmts(self, f, io, cur, x, flex, nullable):
        """Statements reading (io "rd") or writing (io "wr") one non-array
        value of field f, the lvalue x, through cursor/buffer cur."""
        t = f.elem
        rd = io == "rd"
        if f.nullable_struct:
            return self.nullable_struct_stmts(f, io, cur, x, nullable)
        if f.struct:
            return ["dec_%s(%s, v, &%s, a);" % (f.struct.cname, cur, x) if rd else
                    "enc_%s(%s, v, &%s);" % (f.struct.cname, cur, x)]
        if t in SCALARS:
            return ["%s = %s;" % (x, SCALARS[t][1].format(r=cur)) if rd else
                    SCALARS[t][2].format(b=cur, x=x) + ";"]
        if t == "uuid":
            return ["kp_%s_uuid(%s, %s);" % (io, cur, x)]
        fn = "kp_msg_%s_%s" % (io, "str" if t == "string" else "bytes")
        if t == "records" and not rd:
            fn = "kp_msg_wr_records"     # may be spliced by the caller (msgs.c M5)
        return ["%s = %s(%s, %s, %s);" % (x, fn, cur, flex, nullable) if rd else
                "%s(%s, %s, %s, %s);" % (fn, cur, flex, nullable, x)]

    def nullable_struct_stmts(self, f, io, cur, x, nullable):
        sc = f.struct.cname
        if io == "rd":
            return ["{",
                    "    bool present = true;",
                    "    if (%s)" % nullable,
                    "        present = kp_rd_i8(%s) >= 0;" % cur,
                    "    %s = present ? kp_msg_alloc(%s, a, 1, sizeof(struct %s)) : NULL;" % (x, cur, sc),
                    "    if (%s) {" % x,
                    "        init_%s(%s);" % (sc, x),
                    "        dec_%s(%s, v, %s, a);" % (sc, cur, x),
                    "    }",
                    "}"]
        # Where it cannot be null, a NULL pointer is written as the default struct.
        return ["{",
                "    const struct %s *p = %s;" % (sc, x),
                "    struct %s dflt;" % sc,
                "    if (%s) {" % nullable,
                "        kp_wr_i8(%s, p ? 1 : -1);" % cur,
                "    } else if (!p) {",
                "        init_%s(&dflt);" % sc,
                "        p = &dflt;",
                "    }",
                "    if (p)",
                "        enc_%s(%s, v, p);" % (sc, cur),
                "}"]

    def elem_ctype(self, f):
        if f.struct:
            return "struct %s" % f.struct.cname
        if f.elem in SCALARS:
            return SCALARS[f.elem][0]
        if f.elem == "uuid":
            return "uint8_t[16]"
        return "kp_str"

    def flex_expr(self, msg, f, valid):
        if f.flex_override == "inherit":
            return "flex"
        c = cond(f.flex_override, valid)
        return "false" if c == "false" else ("flex" if c == "true" else "(flex && %s)" % c)

    def minsz_name(self, s):
        return "minsz_" + s.cname

    def field_stmts(self, msg, f, io, cur, flex):
        """Statements reading or writing field f (flex: a C expression)."""
        nul = cond(f.nullable, self.valid)
        m = "m->" + f.name
        if not f.is_array:
            return self.value_stmts(f, io, cur, m, flex, nul)
        if io == "wr":
            lines = ["kp_msg_wr_count(%s, %s, %s, %s_count, %s != NULL);" % (cur, flex, nul, m, m),
                     "if (%s)" % m,
                     "    for (int32_t i = 0; i < %s_count; i++) {" % m]
            lines += ["        " + st for st in self.value_stmts(f, io, cur, "%s[i]" % m, flex, "false")]
            return lines + ["    }"]
        if f.struct:
            minsz = "%s[v]" % self.minsz_name(f.struct)
        elif f.elem in SLICES:
            minsz = "(%s) ? 1 : %d" % (flex, 2 if f.elem == "string" else 4)
        else:
            minsz = str(elem_min(msg, f, self.valid[0], False))
        ct = self.elem_ctype(f)
        lines = ["{",
                 "    int32_t n = kp_msg_rd_count(%s, %s, %s, %s);" % (cur, flex, nul, minsz),
                 "    %s_count = n;" % m,
                 "    if (n > 0) {",
                 "        %s = kp_msg_alloc(%s, a, (size_t)n, sizeof(%s));" % (m, cur, ct),
                 "        if (!%s)" % m,
                 "            %s_count = 0;" % m,
                 "        for (int32_t i = 0; i < %s_count && kp_rd_ok(%s); i++) {" % (m, cur)]
        el = "%s[i]" % m
        if f.struct:
            lines.append("            init_%s(&%s);" % (f.struct.cname, el))
        lines += ["            " + st for st in self.value_stmts(f, io, cur, el, flex, "false")]
        return lines + ["        }", "    }", "}"]

    def isdef_expr(self, f, x):
        """C expression: x (an lvalue of field f) holds its default."""
        if f.is_array:
            return "%s_count == %d" % (x, -1 if f.default == "null" else 0)
        if f.nullable_struct:
            if f.default == "null":
                return "%s == NULL" % x
            self.need_isdef.add(f.struct.cname)
            return "(%s == NULL || isdef_%s(%s))" % (x, f.struct.cname, x)
        if f.struct:
            self.need_isdef.add(f.struct.cname)
            return "isdef_%s(&%s)" % (f.struct.cname, x)
        if f.elem in SCALARS:
            if f.elem == "float64":
                return "%s == %s" % (x, c_int_literal("float64", f.default or 0))
            return "%s == %s" % (x, c_int_literal(f.elem, f.default if f.default is not None else
                                                  ("false" if f.elem == "bool" else 0)))
        if f.elem == "uuid":
            return "kp_msg_uuid_zero(%s)" % x
        return slice_default(f)[1].format(x=x)

    def init_lines(self, f):
        m = "m->" + f.name
        if f.is_array:
            return ["%s_count = %d;" % (m, -1 if f.default == "null" else 0)]
        if f.nullable_struct:
            return []                # NULL
        if f.struct:
            return ["init_%s(&%s);" % (f.struct.cname, m)]
        if f.elem in SCALARS:
            d = f.default
            if d is None:
                return []            # memset 0
            lit = c_int_literal(f.elem, d)
            return [] if lit in ("0", "false", "INT64_C(0)", "0.0") else ["%s = %s;" % (m, lit)]
        if f.elem == "uuid":
            return []
        return ["%s = %s;" % (m, slice_default(f)[0])]

    # -- per-struct functions --
    def emit_struct_fns(self, msg, s):
        c = self.c
        # Conditions are simplified against the versions the struct can
        # occur in (a nested struct only exists where its field does).
        valid = s.versions or msg.valid
        self.valid = valid
        nv = msg.valid[1] + 1
        mins = [struct_min(msg, s, v) if v >= msg.valid[0] else 0 for v in range(nv)]
        if any(f.is_array and f.struct is s for t in msg.structs for f in t.fields):
            c.append("static const uint16_t %s[%d] = { %s };" %
                     (self.minsz_name(s), nv, ", ".join(str(x) for x in mins)))
            c.append("")
        # init
        c.append("static void init_%s(struct %s *m)" % (s.cname, s.cname))
        c.append("{")
        c.append("    memset(m, 0, sizeof *m);")
        for f in s.fields:
            for ln in self.init_lines(f):
                c.append("    " + ln)
        c.append("}")
        c.append("")
        fflex = cond(msg.flex, valid)
        tagged = sorted([f for f in s.fields if f.tag is not None], key=lambda f: f.tag)
        # decode
        self.open_fn("static void dec_%s(kp_rd *r, int16_t v, struct %s *m, kp_arena *a)"
                     % (s.cname, s.cname), fflex, ("v", "flex", "a", "m"))
        for f in s.fields:
            cw = cond(f.wire_versions(), valid)
            if cw == "false":
                continue
            body = self.field_stmts(msg, f, "rd", "r", self.flex_expr(msg, f, valid))
            self.emit_guarded(c, cw, body, "    ")
        if fflex != "false":
            if tagged:
                c.append("    if (flex) {")
                c.append("        uint32_t nt = kp_msg_rd_tag_count(r);")
                c.append("        for (uint32_t t = 0; t < nt && kp_rd_ok(r); t++) {")
                c.append("            kp_rd sub;")
                c.append("            uint32_t tag = kp_msg_rd_tag(r, &sub);")
                c.append("            if (!kp_rd_ok(r))")
                c.append("                break;")
                c.append("            switch (tag) {")
                for f in tagged:
                    ct = cond(f.tag_versions(), valid)
                    c.append("            case %d:" % f.tag)
                    body = self.field_stmts(msg, f, "rd", "(&sub)", "true")
                    if ct == "false":
                        c.append("                break;   /* not tagged in any valid version */")
                        continue
                    self.emit_guarded(c, ct, body, "                ")
                    c.append("                break;")
                c.append("            default:")
                c.append("                break;           /* unknown tag: skipped (G4) */")
                c.append("            }")
                c.append("            if (sub.err)")
                c.append("                kp_rd_fail(r, sub.err);")
                c.append("        }")
                c.append("    }")
            else:
                c.append("    kp_rd_tags_v(r, flex);")
        c.append("}")
        c.append("")
        # encode
        self.open_fn("static void enc_%s(kp_buf *b, int16_t v, const struct %s *m)"
                     % (s.cname, s.cname), fflex, ("v", "flex", "m"))
        for f in s.fields:
            cw = cond(f.wire_versions(), valid)
            ct = cond(f.tag_versions(), valid)
            carried = "false"
            if cw != "false" and ct != "false":
                carried = "(%s) || (%s)" % (cw, ct)
            elif cw != "false":
                carried = cw
            elif ct != "false":
                carried = ct
            if cw != "false":
                body = self.field_stmts(msg, f, "wr", "b", self.flex_expr(msg, f, valid))
                self.emit_guarded(c, cw, body, "    ")
            if not f.ignorable and carried != "true":
                chk = "!(%s) && " % carried if carried != "false" else ""
                c.append("    if (%s!(%s))" % (chk, self.isdef_expr(f, "m->" + f.name)))
                c.append("        kp_buf_fail(b, KP_E_VERSION);   /* G1 */")
        if fflex != "false":
            if tagged:
                c.append("    if (flex) {")
                for f in tagged:
                    ct = cond(f.tag_versions(), valid)
                    c.append("        bool has_%s = %s && !(%s);" %
                             (f.name, "(%s)" % ct, self.isdef_expr(f, "m->" + f.name)))
                c.append("        kp_wr_uvarint(b, %s);" %
                         " + ".join("(uint32_t)has_%s" % f.name for f in tagged))
                for f in tagged:
                    c.append("        if (has_%s) {" % f.name)
                    c.append("            size_t pos = kp_msg_wr_tag_begin(b, %d);" % f.tag)
                    for ln in self.field_stmts(msg, f, "wr", "b", "true"):
                        c.append("            " + ln)
                    c.append("            kp_msg_wr_tag_end(b, pos);")
                    c.append("        }")
                c.append("    }")
            else:
                c.append("    kp_wr_tags_v(b, flex);")
        c.append("}")
        c.append("")

    def open_fn(self, signature, fflex, unused):
        """A struct codec's opening: whether this version is flexible, and
        the (void) casts for what a small struct does not use."""
        self.c += [signature, "{", "    bool flex = %s;" % fflex,
                   "    " + " ".join("(void)%s;" % u for u in unused)]

    def emit_guarded(self, c, cw, body, ind):
        if cw == "true":
            for ln in body:
                c.append(ind + ln)
        else:
            c.append(ind + "if (%s) {" % cw)
            for ln in body:
                c.append(ind + "    " + ln)
            c.append(ind + "}")

    def emit_isdef(self, msg, s):
        c = self.c
        c.append("static bool isdef_%s(const struct %s *m)" % (s.cname, s.cname))
        c.append("{")
        exprs = [self.isdef_expr(f, "m->" + f.name) for f in s.fields]
        c.append("    return %s;" % ("\n        && ".join("(%s)" % e for e in exprs) if exprs else "true"))
        c.append("}")
        c.append("")

    def generate(self):
        h, c = self.h, self.c
        h += ["/* Generated by protocol/gen_msgs.py from the JSON in protocol/messages/: do not edit. */",
              "#ifndef SLUICE_%s_H" % self.name.upper(), "#define SLUICE_%s_H" % self.name.upper(), "",
              '#include "protocol/kp.h"', ""]
        c += ["/* Generated by protocol/gen_msgs.py from the JSON in protocol/messages/: do not edit.",
              " * The design note and the invariants are in protocol/gen_msgs.py and",
              " * protocol/msgs.c. */",
              "#include <string.h>", "", '#include "%s.h"' % self.name, ""]
        for msg in self.msgs:
            h.append("/* ---- %s: versions %d-%d, flexible %s ---- */" %
                     (msg.name, msg.valid[0], msg.valid[1],
                      "%d+" % msg.first_flex if msg.flex else "none"))
            for s in msg.structs:
                h.append("typedef struct %s %s;" % (s.cname, s.cname))
            for s in msg.structs:               # nested before their users
                self.emit_struct_decl(msg, s)
            u = msg.name
            if msg.kind == "coordinator-key":
                h.append("#define KP_RECORD_TYPE_%s %d   /* the key's INT16 prefix */" %
                         (u, msg.api_key))
            h.append("void kp_init_%s(kp_%s *m);" % (u, u))
            h.append("int kp_dec_%s(kp_rd *in, int16_t version, kp_%s *m, kp_arena *a);" % (u, u))
            h.append("int kp_enc_%s(kp_buf *out, int16_t version, const kp_%s *m);" % (u, u))
            h.append("")
        for msg in self.msgs:
            c.append("/* ==== %s ==== */" % msg.name)
            for s in msg.structs:
                c.append("static void init_%s(struct %s *m);" % (s.cname, s.cname))
                c.append("static void dec_%s(kp_rd *r, int16_t v, struct %s *m, kp_arena *a);" % (s.cname, s.cname))
                c.append("static void enc_%s(kp_buf *b, int16_t v, const struct %s *m);" % (s.cname, s.cname))
            c.append("")
            self.need_isdef = set()
            body_start = len(c)
            for s in msg.structs:
                self.emit_struct_fns(msg, s)
            # isdef functions: emitted before the bodies that use them
            iso = []
            saved, self.c = self.c, iso
            done = set()
            while self.need_isdef - done:
                for s in msg.structs:
                    if s.cname in self.need_isdef and s.cname not in done:
                        done.add(s.cname)
                        self.emit_isdef(msg, s)
            self.c = saved
            if iso:
                decl = ["static bool isdef_%s(const struct %s *m);" % (n, n) for n in sorted(done)]
                c[body_start:body_start] = decl + [""] + iso
            u = msg.name
            lo, hi = msg.valid
            c += ["void kp_init_%s(kp_%s *m)" % (u, u), "{", "    init_kp_%s(m);" % u, "}", "",
                  "int kp_dec_%s(kp_rd *in, int16_t version, kp_%s *m, kp_arena *a)" % (u, u), "{",
                  "    init_kp_%s(m);" % u,
                  "    if (version < %d || version > %d)" % (lo, hi),
                  "        return KP_E_VERSION;",
                  "    dec_kp_%s(in, version, m, a);" % u,
                  "    return in->err;", "}", "",
                  "int kp_enc_%s(kp_buf *out, int16_t version, const kp_%s *m)" % (u, u), "{",
                  "    if (version < %d || version > %d)" % (lo, hi),
                  "        return KP_E_VERSION;",
                  "    enc_kp_%s(out, version, m);" % u,
                  "    return out->err;", "}", "",
                  "static void any_init_%s(void *m) { kp_init_%s(m); }" % (u, u),
                  "static int any_dec_%s(kp_rd *in, int16_t v, void *m, kp_arena *a) { return kp_dec_%s(in, v, m, a); }" % (u, u),
                  "static int any_enc_%s(kp_buf *out, int16_t v, const void *m) { return kp_enc_%s(out, v, m); }" % (u, u),
                  ""]
        if self.table != "kp_msg_descs":
            h += ["extern const kp_msg_desc %s[];" % self.table,
                  "extern const size_t %s_count;" % self.table, ""]
        c.append("const kp_msg_desc %s[] = {" % self.table)
        for msg in self.msgs:
            u = msg.name
            c.append('    { "%s", %d, %s, %d, %d, %d, sizeof(kp_%s), any_init_%s, any_dec_%s, any_enc_%s },' %
                     (u, msg.api_key, {"request": "KP_MSG_REQUEST", "response": "KP_MSG_RESPONSE"}.get(msg.kind, "KP_MSG_HEADER"),
                      msg.valid[0], msg.valid[1], msg.first_flex, u, u, u, u))
        c.append("};")
        c.append("const size_t {t}_count = sizeof {t} / sizeof {t}[0];".format(t=self.table))
        c.append("")
        h.append("#endif")
        h.append("")


def main(argv):
    name = "kp_msgs"
    if len(argv) > 2 and argv[1] == "--name":
        name = argv[2]
        argv = argv[:1] + argv[3:]
    if len(argv) < 3:
        sys.stderr.write("usage: gen_msgs.py [--name NAME] OUT_DIR FILE.json...\n")
        return 2
    out_dir = argv[1]
    msgs = []
    for path in sorted(argv[2:]):
        with open(path, encoding="utf-8") as fp:
            d = json.loads(strip_comments(fp.read()))
        try:
            msgs.append(Message(d, path))
        except SchemaError as e:
            sys.stderr.write("%s: %s\n" % (path, e))
            return 1
    msgs.sort(key=lambda m: (m.api_key, m.kind, m.name))
    g = Gen(msgs, name)
    try:
        g.generate()
    except SchemaError as e:
        sys.stderr.write("gen_msgs.py: %s\n" % e)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    for fname, lines in ((name + ".h", g.h), (name + ".c", g.c)):
        tmp = os.path.join(out_dir, fname + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fp:
            fp.write("\n".join(lines) + "\n")
        os.replace(tmp, os.path.join(out_dir, fname))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
