#!/usr/bin/env python3
"""tools/check_layers.py — the include layering of the tree, checked.

Reads the rules (tools/layers.rules by default) and every #include in the
tree's .c and .h files (build*/ and hidden folders skipped), and fails on:

  (a) an #include "..." from one unit into another that the rules do not
      allow, unless that very include is listed as an exception;
  (b) any include cycle between units (excepted includes left out);
  (c) an #include <...> that a unit forbids (segments/ and protocol/ stay
      free of libevent, SQLite and ZooKeeper);
  (d) an #include "..." of a header the rules call private to its unit,
      from another unit not named beside it (units allowed "*", the tests
      and benches, may include internals);
and also on a .c or .h file that belongs to no unit, an #include "..."
that names no file in the tree nor a generated header, and rules that
themselves allow a cycle.

A unit is a folder (or a single file, such as daemon/main.c); a file
belongs to the unit of the longest matching path, so daemon/net/x.c is in
daemon/net, not daemon.  Including a header of one's own unit is always
allowed.  An exception that matches no include any more is reported as
stale (a warning: delete the line; --strict makes it an error).

  python3 tools/check_layers.py [--rules FILE] [--root DIR] [--strict] [-v]
  python3 tools/check_layers.py --calls build      (after a build; a report)

--calls sees what includes cannot: a function declared in a lower room's
header but defined in a higher room (replica.h's repl_isr_size, defined
in replication/repl_isr.c) is a call upwards that no #include shows.  It
reads the objects under BUILD/obj with nm, maps each to its source's unit,
and lists the calls between units that the rules do not allow, with the
functions.  A report, not a check: exit 0 (1 with --strict).

Exit status 0 when the tree follows the rules, 1 when it does not, 2 when
the rule file is malformed.
"""
import argparse
import os
import re
import subprocess
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


class RuleError(Exception):
    pass


class Rules:
    def __init__(self):
        self.allow = {}         # unit -> set of units it may include ('*': all)
        self.generated = {}     # header basename -> unit
        self.forbid = {}        # unit -> list of <...> prefixes
        self.exceptions = {}    # (file, header) -> rule-file line number
        self.private = {}       # header -> set of other units that may include it


def parse_rules(path):
    r = Rules()
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.split('#', 1)[0].strip()
            if not line:
                continue
            where = f'{path}:{n}'
            if line.startswith('generated '):
                m = re.fullmatch(r'generated\s+(\S+)\s*=\s*(\S+)', line)
                if not m:
                    raise RuleError(f'{where}: expected "generated HEADER = UNIT"')
                r.generated[m.group(1)] = m.group(2)
            elif line.startswith('forbid '):
                m = re.fullmatch(r'forbid\s+([^:]+):\s*(.+)', line)
                if not m:
                    raise RuleError(f'{where}: expected "forbid UNIT...: HEADER-OR-FOLDER/..."')
                for u in m.group(1).split():
                    r.forbid.setdefault(u, []).extend(m.group(2).split())
            elif line.startswith('private '):
                m = re.fullmatch(r'private\s+(\S+)\s*:(.*)', line)
                if not m:
                    raise RuleError(f'{where}: expected "private HEADER: UNIT..."')
                r.private[m.group(1)] = set(m.group(2).split())
            elif line.startswith('except '):
                m = re.fullmatch(r'except\s+(\S+)\s*->\s*(\S+)', line)
                if not m:
                    raise RuleError(f'{where}: expected "except FILE -> HEADER"')
                r.exceptions[(m.group(1), m.group(2))] = n
            else:
                m = re.fullmatch(r'(\S+)\s*:(.*)', line)
                if not m:
                    raise RuleError(f'{where}: expected "UNIT: UNIT..."')
                if m.group(1) in r.allow:
                    raise RuleError(f'{where}: unit {m.group(1)} declared twice')
                r.allow[m.group(1)] = set(m.group(2).split())
    units = set(r.allow)
    for u, targets in r.allow.items():
        for t in targets - {'*'}:
            if t not in units:
                raise RuleError(f'{path}: {u} may include {t}, which is no unit')
    for h, u in r.generated.items():
        if u not in units:
            raise RuleError(f'{path}: generated {h} belongs to {u}, which is no unit')
    for u in r.forbid:
        if u not in units:
            raise RuleError(f'{path}: forbid names {u}, which is no unit')
    for h, us in r.private.items():
        for u in us - units:
            raise RuleError(f'{path}: private {h} names {u}, which is no unit')
    return r


def unit_of(path, units):
    best = None
    for u in units:
        if (path == u or path.startswith(u + '/')) and (best is None or len(u) > len(best)):
            best = u
    return best


def find_cycle(graph):
    """One cycle of graph (node -> set of nodes) as a list of nodes, or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {v: WHITE for v in graph}
    stack = []

    def visit(v):
        colour[v] = GREY
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if colour.get(w, WHITE) == GREY:
                return stack[stack.index(w):] + [w]
            if colour.get(w, WHITE) == WHITE:
                c = visit(w)
                if c:
                    return c
        stack.pop()
        colour[v] = BLACK
        return None

    for v in sorted(graph):
        if colour[v] == WHITE:
            c = visit(v)
            if c:
                return c
    return None


def sources(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(('.', 'build')))
        for f in sorted(files):
            if f.endswith(('.c', '.h')):
                yield os.path.relpath(os.path.join(d, f), root)


def check(root, rules, strict=False, verbose=False):
    units = list(rules.allow)
    errors, warnings = [], []
    used_exceptions = set()
    graph = {u: set() for u in units}       # actual edges, exceptions left out
    excepted_edges = {}

    for path in sources(root):
        src_unit = unit_of(path, units)
        if src_unit is None:
            errors.append(f'{path}: in no unit of the rules (declare its folder)')
            continue
        with open(os.path.join(root, path), errors='replace') as f:
            lines = f.readlines()
        for n, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            kind, inc = m.groups()
            where = f'{path}:{n}'
            if kind == '<':
                for banned in rules.forbid.get(src_unit, ()):
                    # "event2/" bans a folder of headers, "sqlite3.h" one header
                    if inc.startswith(banned) if banned.endswith('/') else inc == banned:
                        errors.append(f'{where}: #include <{inc}>: {src_unit} '
                                      f'may not use <{banned}{"..." if banned.endswith("/") else ""}> '
                                      f'(rule "forbid")')
                continue
            if os.path.isfile(os.path.join(root, inc)):
                target = os.path.normpath(inc)
            elif os.path.isfile(os.path.join(root, os.path.dirname(path), inc)):
                target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
            elif inc in rules.generated:
                target = None
            else:
                errors.append(f'{where}: #include "{inc}" names no file in the tree '
                              f'and no generated header of the rules')
                continue
            dst_unit = rules.generated[inc] if target is None else unit_of(target, units)
            if dst_unit is None:
                errors.append(f'{where}: #include "{inc}": {target} is in no unit')
                continue
            if dst_unit == src_unit:
                continue
            key = (path, target or inc)
            star = '*' in rules.allow[src_unit]
            problems = []
            if dst_unit not in rules.allow[src_unit] and not star:
                problems.append(f'{src_unit} may not include {dst_unit} (allowed: '
                                f'{" ".join(sorted(rules.allow[src_unit])) or "nothing"})')
            if (target in rules.private and not star
                    and src_unit not in rules.private[target]):
                others = " ".join(sorted(rules.private[target]))
                problems.append(f'private to {dst_unit}{" and " + others if others else ""}: '
                                f'include its room\'s public header')
            if key in rules.exceptions:
                used_exceptions.add(key)
                excepted_edges.setdefault((src_unit, dst_unit), []).append(key)
                if not problems:
                    warnings.append(f'{where}: exception for "{inc}" not needed: '
                                    f'the rules allow it')
                continue
            graph[src_unit].add(dst_unit)
            for problem in problems:
                errors.append(f'{where}: #include "{inc}": {problem}')

    for h in sorted(rules.private):
        if not os.path.isfile(os.path.join(root, h)):
            errors.append(f'layers.rules: private {h}: no such header')
    for key, n in sorted(rules.exceptions.items(), key=lambda kv: kv[1]):
        if key not in used_exceptions:
            msg = (f'layers.rules:{n}: stale exception {key[0]} -> {key[1]}: '
                   f'no such include any more; delete the line')
            (errors if strict else warnings).append(msg)

    cycle = find_cycle(graph)
    if cycle:
        errors.append('include cycle between units: ' + ' -> '.join(cycle))
    allowed = {u: (set(units) - {u} if '*' in t else t) for u, t in rules.allow.items()}
    # '*' units (tests, bench) include everything and are included by none:
    # left out, or every rule would close a cycle through them.
    stars = {u for u, t in rules.allow.items() if '*' in t}
    cycle = find_cycle({u: t - stars for u, t in allowed.items() if u not in stars})
    if cycle:
        errors.append('the rules themselves allow a cycle: ' + ' -> '.join(cycle))

    if verbose:
        for (a, b), keys in sorted(excepted_edges.items()):
            print(f'excepted {a} -> {b}: {len(keys)} include(s)')
    return errors, warnings


def nm_symbols(obj):
    """(defined, undefined) global function/data symbols of one object."""
    out = subprocess.run(['nm', '-P', obj], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == 'U':
            undefined.add(name)
        elif kind in 'TDBRWVC':                 # global text, data, bss, rodata, weak
            defined.add(name)
    return defined, undefined


def check_calls(root, build, rules, verbose=False):
    """Calls (and data references) between units against the rules.  Returns
    the list of report lines for edges the rules do not allow."""
    units = list(rules.allow)
    objroot = os.path.join(build, 'obj')
    owner = {}                                  # symbol -> (unit, source)
    refs = []                                   # (unit, source, symbol)
    for d, _, files in os.walk(objroot):
        for f in sorted(files):
            if not f.endswith('.o'):
                continue
            obj = os.path.join(d, f)
            src = os.path.relpath(obj, objroot)[:-2] + '.c'
            if src.startswith('gen/'):          # generated: kp_msgs.c etc.
                unit = 'protocol' if 'kp_msgs.c' in src else None
            else:
                unit = unit_of(src, units)
            if unit is None:
                continue
            defined, undefined = nm_symbols(obj)
            for sym in defined:
                owner.setdefault(sym, (unit, src))
            refs.extend((unit, src, sym) for sym in undefined)
    edges = {}
    for unit, src, sym in refs:
        if sym not in owner:
            continue                            # a library's (libc, libevent, ...)
        dst, dst_src = owner[sym]
        if dst == unit or '*' in rules.allow[unit] or dst in rules.allow[unit]:
            continue
        edges.setdefault((unit, dst), set()).add(f'{src} -> {sym} ({dst_src})')
    report = []
    for (a, b), calls in sorted(edges.items()):
        report.append(f'calls {a} -> {b}: {len(calls)} reference(s)')
        shown = sorted(calls) if verbose else sorted(calls)[:3]
        report.extend(f'    {c}' for c in shown)
        if len(shown) < len(calls):
            report.append(f'    ... {len(calls) - len(shown)} more (-v lists them all)')
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--root', default=os.path.dirname(here))
    ap.add_argument('--rules', default=os.path.join(here, 'layers.rules'))
    ap.add_argument('--strict', action='store_true', help='stale exceptions are errors')
    ap.add_argument('-v', '--verbose', action='store_true', help='list the excepted edges')
    ap.add_argument('--calls', metavar='BUILD',
                    help='report calls between units against the rules, from BUILD/obj')
    args = ap.parse_args()
    try:
        rules = parse_rules(args.rules)
    except (RuleError, OSError) as e:
        print(f'check_layers: {e}', file=sys.stderr)
        return 2
    if args.calls:
        report = check_calls(args.root, args.calls, rules, args.verbose)
        for line in report:
            print(line)
        n = sum(1 for line in report if line.startswith('calls '))
        print(f'check_layers: {n} unit pair(s) with calls the rules do not allow '
              f'(from the objects in {args.calls}/obj)')
        return 1 if (n and args.strict) else 0
    errors, warnings = check(args.root, rules, args.strict, args.verbose)
    for w in warnings:
        print(f'check_layers: warning: {w}', file=sys.stderr)
    for e in errors:
        print(f'check_layers: {e}', file=sys.stderr)
    n = len(rules.exceptions)
    if errors:
        print(f'check_layers: {len(errors)} violation(s) of {args.rules}', file=sys.stderr)
        return 1
    print(f'check_layers: includes follow {os.path.relpath(args.rules, args.root)} '
          f'({len(rules.allow)} units, {n} excepted includes)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
