/*
 * sluice-sql — the SQL admin shell.
 *
 *   sluice-sql [-b host:port] [--token T] [-c "SQL"] [--format table|csv|json|line]
 *              [--headers on|off] [--data-dir DIR]
 *
 * Talks to a broker's admin endpoint (POST /sql; -b, default 127.0.0.1:9644
 * or $SLUICE_ADMIN; the bearer token from --token or $SLUICE_ADMIN_TOKEN), or
 * with --data-dir opens a stopped broker's database read-only and runs the
 * same SQL surface in-process (admin/sql_surface.c) for forensics.
 *
 * Modes: -c runs its statements and exits (status 1 if one failed); with a
 * terminal on stdin, an interactive shell with line editing and history
 * (libedit; ~/.sluice_sql_history) and sqlite3-like dot-commands; otherwise
 * statements are read from stdin.  A statement ends with ';' at the end of
 * a line (sqlite3_complete decides), so statements span lines.
 */
#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <editline/readline.h>
#include <sqlite3.h>

#include "admin/sql_surface.h"

static struct {
    char host[256];
    char port[16];
    const char *token;
    const char *data_dir;
    int format;
    bool headers;
    bool timer;
    sq_conn *local;
    sq_snap *snap;
} sh = { .format = SQ_FMT_TABLE, .headers = true };

static const char *format_name(int f)
{
    static const char *const names[] = { "table", "csv", "json", "line" };
    return f >= 0 && f < 4 ? names[f] : "table";
}

/* ---- transport: HTTP ------------------------------------------------------------------- */
static void url_escape(char *out, size_t cap, const char *s)
{
    size_t k = 0;
    for (; *s && k + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.')
            out[k++] = (char)ch;
        else
            k += (size_t)snprintf(out + k, cap - k, "%%%02X", ch);
    }
    out[k] = 0;
}

/* POSTs sql; body to *out (malloc'd).  Returns the HTTP status or -1. */
static int http_sql(const char *sql, char **out, size_t *outlen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
    int rc = getaddrinfo(sh.host, sh.port, &hints, &ai);
    if (rc) {
        fprintf(stderr, "sluice-sql: %s:%s: %s\n", sh.host, sh.port, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *p = ai; p; p = p->ai_next) {
        fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
        if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen) == 0)
            break;
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        fprintf(stderr, "sluice-sql: cannot connect to the admin endpoint %s:%s: %s "
                "(is the broker running? admin.listeners / -b)\n", sh.host, sh.port,
                strerror(errno));
        return -1;
    }
    char esc[32];
    url_escape(esc, sizeof esc, format_name(sh.format));
    size_t len = strlen(sql);
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "POST /sql?format=%s&headers=%s HTTP/1.1\r\nHost: %s:%s\r\n"
                      "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                      "%s%s%sConnection: close\r\n\r\n",
                      esc, sh.headers ? "on" : "off", sh.host, sh.port, len,
                      sh.token ? "Authorization: Bearer " : "", sh.token ? sh.token : "",
                      sh.token ? "\r\n" : "");
    const char *parts[2] = { head, sql };
    size_t lens[2] = { (size_t)hl, len };
    for (int i = 0; i < 2; i++)
        for (size_t done = 0; done < lens[i];) {
            ssize_t w = write(fd, parts[i] + done, lens[i] - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                fprintf(stderr, "sluice-sql: sending to %s:%s: %s\n", sh.host, sh.port,
                        strerror(errno));
                close(fd);
                return -1;
            }
            done += (size_t)w;
        }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        if (!buf)
            abort();
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    int status = -1;
    char *body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) || !body || sscanf(buf + 9, "%d", &status) != 1) {
        fprintf(stderr, "sluice-sql: bad response from %s:%s\n", sh.host, sh.port);
        free(buf);
        return -1;
    }
    body += 4;
    *outlen = n - (size_t)(body - buf);
    *out = malloc(*outlen + 1);
    memcpy(*out, body, *outlen + 1);
    free(buf);
    return status;
}

/* ---- running ---------------------------------------------------------------------------- */
static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

/* Runs sql, prints rows or the error.  0 ok, 1 error. */
static int run(const char *sql)
{
    double t0 = now_s();
    int bad = 0;
    if (sh.local) {
        sq_result res = { 0 };
        kp_buf_init(&res.out);
        sq_run(sh.local, sql, sh.format, sh.headers, &res);
        if (res.out.len)
            fwrite(res.out.data, 1, res.out.len, stdout);
        if (res.failed) {
            fprintf(stderr, "Error: %s\n", res.err);
            bad = 1;
        }
        sq_result_free(&res);
    } else {
        char *body = NULL;
        size_t len = 0;
        int status = http_sql(sql, &body, &len);
        if (status < 0) {
            bad = 1;
        } else if (status == 200) {
            fwrite(body, 1, len, stdout);
        } else {
            /* The endpoint says "Error: …" (or {"error": …} in JSON). */
            fwrite(body, 1, len, stderr);
            if (len && body[len - 1] != '\n')
                fputc('\n', stderr);
            bad = 1;
        }
        free(body);
    }
    fflush(stdout);
    if (sh.timer)
        fprintf(stderr, "Run Time: real %.3f\n", now_s() - t0);
    return bad;
}

/* ---- dot-commands ------------------------------------------------------------------------------ */
static const char *const surface_tables[] = {
    "brokers", "topics", "partitions", "topic_configs", "consumer_groups",
    "group_members", "group_assignments", "committed_offsets", "consumer_lag",
    "messages", NULL
};

static int show_schema(const char *table)
{
    int saved_fmt = sh.format;
    bool saved_h = sh.headers;
    int bad = 0;
    for (const char *const *t = surface_tables; *t; t++) {
        if (table && strcasecmp(table, *t))
            continue;
        printf("CREATE TABLE %s (\n", *t);
        fflush(stdout);
        char sql[512];
        snprintf(sql, sizeof sql, "SELECT '  ' || name || ' ' || CASE WHEN type = '' "
                 "THEN 'ANY' ELSE type END || CASE WHEN cid < (SELECT max(cid) FROM "
                 "pragma_table_info('%s')) THEN ',' ELSE '' END FROM pragma_table_info('%s')",
                 *t, *t);
        sh.format = SQ_FMT_TABLE;               /* one column: printed as is */
        sh.headers = false;
        bad |= run(sql);
        printf(");\n");
        if (table)
            break;
    }
    sh.format = saved_fmt;
    sh.headers = saved_h;
    return bad;
}

static int process(const char *text);

static int read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "Error: cannot open \"%s\": %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 >= cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf)
        return 1;
    buf[n] = 0;
    int bad = process(buf);
    free(buf);
    return bad;
}

static bool on_off(const char *v, bool *out)
{
    if (v && (!strcasecmp(v, "on") || !strcmp(v, "1") || !strcasecmp(v, "yes"))) { *out = true; return true; }
    if (v && (!strcasecmp(v, "off") || !strcmp(v, "0") || !strcasecmp(v, "no"))) { *out = false; return true; }
    return false;
}

static const char help_text[] =
    ".headers on|off        Turn display of column names on or off\n"
    ".help                  Show this message\n"
    ".mode table|csv|json|line   Set the output mode\n"
    ".quit / .exit          Leave the shell\n"
    ".read FILE             Run the statements in FILE\n"
    ".schema [TABLE]        Show the columns of the operator tables\n"
    ".tables                List the operator tables\n"
    ".timer on|off          Show the time each statement takes\n"
    "Statements end with ';'.  The tables are documented in sql/README.md.\n";

/* 0 ok, 1 error, 2 quit. */
static int dot(char *line)
{
    char *argv[4] = { 0 };
    int argc = 0;
    for (char *tok = strtok(line, " \t\r\n"); tok && argc < 4; tok = strtok(NULL, " \t\r\n"))
        argv[argc++] = tok;
    const char *cmd = argv[0];
    if (!strcmp(cmd, ".quit") || !strcmp(cmd, ".exit"))
        return 2;
    if (!strcmp(cmd, ".help")) {
        fputs(help_text, stdout);
        return 0;
    }
    if (!strcmp(cmd, ".tables")) {
        for (const char *const *t = surface_tables; *t; t++)
            printf("%s%s", *t, t[1] ? "  " : "\n");
        return 0;
    }
    if (!strcmp(cmd, ".schema"))
        return show_schema(argv[1]);
    if (!strcmp(cmd, ".mode")) {
        int f = argv[1] ? sq_format_parse(argv[1]) : -1;
        if (f < 0) {
            fprintf(stderr, "Error: .mode table|csv|json|line (now %s)\n", format_name(sh.format));
            return 1;
        }
        sh.format = f;
        return 0;
    }
    if (!strcmp(cmd, ".headers") || !strcmp(cmd, ".header")) {
        if (!on_off(argv[1], &sh.headers)) {
            fprintf(stderr, "Error: .headers on|off\n");
            return 1;
        }
        return 0;
    }
    if (!strcmp(cmd, ".timer")) {
        if (!on_off(argv[1], &sh.timer)) {
            fprintf(stderr, "Error: .timer on|off\n");
            return 1;
        }
        return 0;
    }
    if (!strcmp(cmd, ".read")) {
        if (!argv[1]) {
            fprintf(stderr, "Error: .read FILE\n");
            return 1;
        }
        return read_file(argv[1]);
    }
    fprintf(stderr, "Error: unknown command \"%s\"; .help lists them\n", cmd);
    return 1;
}

/* Accumulates lines: a dot-command at the start of a statement runs on its
 * own; SQL runs once sqlite3_complete says the statement ended. */
typedef struct acc { char *buf; size_t len, cap; } acc;

static void acc_add(acc *a, const char *line)
{
    size_t l = strlen(line);
    if (a->len + l + 2 > a->cap) {
        a->cap = (a->len + l + 2) * 2;
        a->buf = realloc(a->buf, a->cap);
        if (!a->buf)
            abort();
    }
    memcpy(a->buf + a->len, line, l);
    a->len += l;
    a->buf[a->len++] = '\n';
    a->buf[a->len] = 0;
}

/* Feeds one line; returns 0/1 (error)/2 (quit). */
static int feed(acc *a, const char *line, bool *pending)
{
    int rc = 0;
    if (a->len == 0) {
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '.') {
            char *copy = strdup(p);
            rc = dot(copy);
            free(copy);
            *pending = false;
            return rc;
        }
        if (!*p)
            return 0;
    }
    acc_add(a, line);
    if (sqlite3_complete(a->buf)) {
        rc = run(a->buf);
        a->len = 0;
        a->buf[0] = 0;
    }
    *pending = a->len > 0;
    return rc;
}

static int process(const char *text)
{
    acc a = { 0 };
    bool pending = false;
    int bad = 0;
    char *copy = strdup(text);
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        int rc = feed(&a, line, &pending);
        if (rc == 2)
            break;
        bad |= rc;
    }
    if (pending && a.len) {                      /* a last statement without ';' */
        bad |= run(a.buf);
    }
    free(copy);
    free(a.buf);
    return bad;
}

static int interactive(void)
{
    char hist[4096] = "";
    const char *home = getenv("HOME");
    if (home) {
        snprintf(hist, sizeof hist, "%s/.sluice_sql_history", home);
        using_history();
        read_history(hist);
    }
    printf("sluice-sql: %s%s%s.  \".help\" for help; statements end with ';'.\n",
           sh.local ? "read-only, " : "connected to ", sh.local ? sh.data_dir : sh.host,
           sh.local ? " (stopped broker)" : "");
    if (!sh.local)
        printf("Admin endpoint %s:%s\n", sh.host, sh.port);
    acc a = { 0 };
    bool pending = false;
    char *line;
    while ((line = readline(pending ? "   ...> " : "sluice> "))) {
        if (*line)
            add_history(line);
        int rc = feed(&a, line, &pending);
        free(line);
        if (rc == 2)
            break;
    }
    if (hist[0])
        write_history(hist);
    free(a.buf);
    return 0;
}

static sq_snap *local_live(void *arg)
{
    (void)arg;
    if (sh.snap)
        sq_snap_ref(sh.snap);
    return sh.snap;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: sluice-sql [-b host:port] [--token TOKEN] [-c SQL] [--format table|csv|json|line]\n"
        "                  [--headers on|off] [--data-dir DIR]\n"
        "\n"
        "SQL over a Sluice broker's admin endpoint (default 127.0.0.1:9644, or\n"
        "$SLUICE_ADMIN); the bearer token comes from --token or $SLUICE_ADMIN_TOKEN.\n"
        "--data-dir opens a stopped broker's log.dirs read-only instead.\n"
        "Without -c: an interactive shell on a terminal, else statements from stdin.\n"
        "Tables and a cookbook: sql/README.md.\n");
}

int main(int argc, char **argv)
{
    const char *bootstrap = getenv("SLUICE_ADMIN");
    sh.token = getenv("SLUICE_ADMIN_TOKEN");
    const char *cmd[64];
    int ncmd = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if ((!strcmp(a, "-b") || !strcmp(a, "--bootstrap") || !strcmp(a, "--admin")) && v) {
            bootstrap = v; i++;
        } else if (!strcmp(a, "-c") && v && ncmd < 64) {
            cmd[ncmd++] = v; i++;
        } else if ((!strcmp(a, "--format") || !strcmp(a, "-f")) && v) {
            if ((sh.format = sq_format_parse(v)) < 0) {
                fprintf(stderr, "sluice-sql: --format table|csv|json|line, not %s\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--headers") && v) {
            if (!on_off(v, &sh.headers)) {
                fprintf(stderr, "sluice-sql: --headers on|off\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--token") && v) {
            sh.token = v; i++;
        } else if (!strcmp(a, "--data-dir") && v) {
            sh.data_dir = v; i++;
        } else {
            fprintf(stderr, "sluice-sql: unknown or incomplete argument: %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (sh.token && !*sh.token)
        sh.token = NULL;
    if (!bootstrap || !*bootstrap)
        bootstrap = "127.0.0.1:9644";
    const char *b = strstr(bootstrap, "://");
    b = b ? b + 3 : bootstrap;
    const char *colon = strrchr(b, ':');
    if (!colon || (size_t)(colon - b) >= sizeof sh.host || strlen(colon + 1) >= sizeof sh.port) {
        fprintf(stderr, "sluice-sql: -b expects host:port, got %s\n", bootstrap);
        return 2;
    }
    memcpy(sh.host, b, (size_t)(colon - b));
    snprintf(sh.port, sizeof sh.port, "%s", colon + 1);

    if (sh.data_dir) {
        char path[4200], err[512];
        snprintf(path, sizeof path, "%s/sluice.db", sh.data_dir);
        if (access(path, R_OK)) {
            fprintf(stderr, "sluice-sql: no metadata store at %s: %s\n", path, strerror(errno));
            return 1;
        }
        sq_env env = { .data_dir = sh.data_dir, .broker_id = -1, .broker_alive = false,
                       .live = local_live, .max_rows = INT64_MAX, .timeout_ms = 0 };
        if (sq_open(path, &env, &sh.local, err, sizeof err)) {
            fprintf(stderr, "sluice-sql: %s\n", err);
            return 1;
        }
        sh.snap = sq_snap_from_files(sq_db(sh.local), sh.data_dir);
    }

    int bad = 0;
    if (ncmd) {
        for (int i = 0; i < ncmd && !bad; i++)
            bad |= process(cmd[i]);
    } else if (isatty(0)) {
        bad = interactive();
    } else {
        size_t cap = 65536, n = 0;
        char *in = malloc(cap);
        size_t r;
        while (in && (r = fread(in + n, 1, cap - n - 1, stdin)) > 0) {
            n += r;
            if (n + 1 >= cap)
                in = realloc(in, cap *= 2);
        }
        if (in) {
            in[n] = 0;
            bad = process(in);
            free(in);
        }
    }
    sq_snap_unref(sh.snap);
    sq_close(sh.local);
    return bad ? 1 : 0;
}
