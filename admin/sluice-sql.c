/*
 * sluice-sql — the SQL admin shell.
 *
 *   sluice-sql [-b [http[s]://]host:port | --socket PATH] [--user NAME
 *              [--password-file F]] [--token T | --token-file F]
 *              [--cacert F] [--cert F --key F] [-c "SQL"]
 *              [--format table|csv|json|line] [--headers on|off] [--data-dir DIR]
 *
 * Talks to a broker's admin endpoint (POST /sql): over TCP (-b, default
 * 127.0.0.1:9644 or $SLUICE_ADMIN; https:// with OpenSSL, verifying the
 * broker against --cacert and presenting --cert/--key when given), or over
 * the broker's admin socket (--socket or $SLUICE_SOCKET), where the kernel
 * vouches for our uid.  With neither, ./data/admin.sock (the default
 * log.dirs) when it is there and ours to use, else 127.0.0.1:9644.
 * Credentials (admin_http.c's with_access):
 *   --user NAME   HTTP Basic; the password from $SLUICE_PASSWORD, else
 *                 --password-file, else a prompt without echo on the
 *                 terminal (stdin a tty)
 *   --token T     Bearer admin.token; also $SLUICE_TOKEN,
 *                 $SLUICE_ADMIN_TOKEN or --token-file (not in ps)
 * Or with --data-dir it opens a stopped broker's database read-only and runs
 * the same SQL surface in-process (admin/sql_surface.c) for forensics.
 *
 * Modes: -c runs its statements and exits (status 1 if one failed); with a
 * terminal on stdin, an interactive shell with line editing and history
 * (libedit; ~/.sluice_sql_history), sqlite3-like dot-commands and psql's
 * \x (expanded display: line mode); otherwise
 * statements are read from stdin.  A statement ends with ';' at the end of
 * a line (sqlite3_complete decides), so statements span lines.
 */
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <editline/readline.h>
#include <sqlite3.h>

#include "admin/sql_surface.h"

/* The admin socket of a broker run from this directory with the default
 * log.dirs (./data): the target when none is given and we may use it. */
#define DEFAULT_SOCKET "data/admin.sock"

static struct {
    char host[256];
    char port[16];
    const char *socket;            /* the admin socket instead of host:port */
    bool https;
    const char *cacert, *cert, *key;
    SSL_CTX *tls;
    const char *token;
    char *basic;                   /* base64(user:password), or NULL */
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

/* One request's connection: a socket, with TLS over it for https. */
typedef struct conn {
    int fd;
    SSL *ssl;
} conn;

static const char *target(void)
{
    static char t[300];
    if (sh.socket)
        return sh.socket;
    snprintf(t, sizeof t, "%s:%s", sh.host, sh.port);
    return t;
}

static int tcp_connect(void)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
    int rc = getaddrinfo(sh.host, sh.port, &hints, &ai);
    if (rc) {
        fprintf(stderr, "sluice-sql: %s:%s: %s\n", sh.host, sh.port, gai_strerror(rc));
        return -2;
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
    return fd;
}

static int unix_connect(void)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    if (strlen(sh.socket) >= sizeof sun.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(sun.sun_path, sh.socket, strlen(sh.socket) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof sun)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The https context: the broker verified against --cacert (else the
 * system's CAs), --cert/--key presented when the broker asks. */
static SSL_CTX *tls_ctx(void)
{
    if (sh.tls)
        return sh.tls;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return NULL;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if ((sh.cacert ? SSL_CTX_load_verify_locations(ctx, sh.cacert, NULL)
                   : SSL_CTX_set_default_verify_paths(ctx)) != 1 ||
        (sh.cert && SSL_CTX_use_certificate_chain_file(ctx, sh.cert) != 1) ||
        (sh.key && SSL_CTX_use_PrivateKey_file(ctx, sh.key, SSL_FILETYPE_PEM) != 1)) {
        char e[256];
        ERR_error_string_n(ERR_get_error(), e, sizeof e);
        fprintf(stderr, "sluice-sql: --cacert/--cert/--key: %s\n", e);
        SSL_CTX_free(ctx);
        return NULL;
    }
    return sh.tls = ctx;
}

/* 0 with c open, or -1 (said on stderr). */
static int conn_open(conn *c)
{
    c->ssl = NULL;
    c->fd = sh.socket ? unix_connect() : tcp_connect();
    if (c->fd == -2)
        return -1;
    if (c->fd < 0) {
        fprintf(stderr, "sluice-sql: cannot connect to the admin endpoint %s: %s "
                "(is the broker running? admin.listeners / admin.socket / -b / --socket)\n",
                target(), strerror(errno));
        return -1;
    }
    if (!sh.https)
        return 0;
    SSL_CTX *ctx = tls_ctx();
    c->ssl = ctx ? SSL_new(ctx) : NULL;
    if (c->ssl) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
        if (!X509_VERIFY_PARAM_set1_ip_asc(vp, sh.host)) {      /* a name, not an address */
            SSL_set1_host(c->ssl, sh.host);
            SSL_set_tlsext_host_name(c->ssl, sh.host);
        }
        SSL_set_fd(c->ssl, c->fd);
    }
    if (!c->ssl || SSL_connect(c->ssl) != 1) {
        char e[256] = "cannot make a TLS context";
        if (c->ssl) {
            long vr = SSL_get_verify_result(c->ssl);
            if (vr != X509_V_OK)
                snprintf(e, sizeof e, "%s", X509_verify_cert_error_string(vr));
            else
                ERR_error_string_n(ERR_get_error(), e, sizeof e);
        }
        fprintf(stderr, "sluice-sql: TLS with %s: %s\n", target(), e);
        SSL_free(c->ssl);
        close(c->fd);
        return -1;
    }
    return 0;
}

static ssize_t conn_write(conn *c, const void *p, size_t n)
{
    if (c->ssl) {
        int w = SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
        return w > 0 ? w : -1;
    }
    return write(c->fd, p, n);
}

/* Why the last TLS read failed ("" when it did not): a listener that
 * requires a client certificate says so with an alert after the
 * handshake, on the first read. */
static char read_fault[256];

static ssize_t conn_read(conn *c, void *p, size_t n)
{
    if (c->ssl) {
        int r = SSL_read(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
        if (r <= 0 && SSL_get_error(c->ssl, r) == SSL_ERROR_SSL)
            ERR_error_string_n(ERR_get_error(), read_fault, sizeof read_fault);
        return r > 0 ? r : 0;     /* close_notify or an abrupt end: the body ends */
    }
    return read(c->fd, p, n);
}

/* Says why the request failed: the TLS refusal read_fault names, else
 * "sluice-sql: <doing> <target>: <errno's text>". */
static void tls_refusal_or(const char *doing, int err)
{
    if (!doing)
        fprintf(stderr, "sluice-sql: TLS with %s: %s%s\n", target(), read_fault,
                strstr(read_fault, "certificate required")
                ? " (the listener requires a client certificate: --cert and --key)" : "");
    else
        fprintf(stderr, "sluice-sql: %s %s: %s\n", doing, target(), strerror(err));
}

static void conn_close(conn *c)
{
    if (c->ssl) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
    }
    close(c->fd);
}

/* POSTs sql; body to *out (malloc'd).  Returns the HTTP status or -1. */
static int http_sql(const char *sql, char **out, size_t *outlen)
{
    conn c;
    if (conn_open(&c))
        return -1;
    char esc[32], host[300];
    url_escape(esc, sizeof esc, format_name(sh.format));
    snprintf(host, sizeof host, "%s", sh.socket ? "localhost" : target());
    size_t len = strlen(sql);
    char head[2048];
    /* No credentials over the socket: its peer's uid alone counts there,
     * and a socket someone else planted must not collect them. */
    const char *token = sh.socket ? NULL : sh.token, *basic = sh.socket ? NULL : sh.basic;
    int hl = snprintf(head, sizeof head,
                      "POST /sql?format=%s&headers=%s HTTP/1.1\r\nHost: %s\r\n"
                      "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                      "%s%s%sConnection: close\r\n\r\n",
                      esc, sh.headers ? "on" : "off", host, len,
                      token ? "Authorization: Bearer " : basic ? "Authorization: Basic "
                      : "", token ? token : basic ? basic : "",
                      token || basic ? "\r\n" : "");
    if (hl < 0 || (size_t)hl >= sizeof head) {
        fprintf(stderr, "sluice-sql: the request header is over %zu bytes (a token, user "
                "name or password that long?)\n", sizeof head);
        conn_close(&c);
        OPENSSL_cleanse(head, sizeof head);
        return -1;
    }
    const char *parts[2] = { head, sql };
    size_t lens[2] = { (size_t)hl, len };
    for (int i = 0; i < 2; i++)
        for (size_t done = 0; done < lens[i];) {
            ssize_t w = conn_write(&c, parts[i] + done, lens[i] - done);
            if (w < 0 && errno == EINTR && !c.ssl)
                continue;
            if (w <= 0) {
                int err = errno;
                char one;
                if (c.ssl)                  /* the alert that closed it, if it came */
                    (void)conn_read(&c, &one, 1);
                tls_refusal_or(read_fault[0] ? NULL : "sending to", err);
                conn_close(&c);
                OPENSSL_cleanse(head, sizeof head);
                return -1;
            }
            done += (size_t)w;
        }
    OPENSSL_cleanse(head, sizeof head);
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        if (!buf)
            abort();
        ssize_t r = conn_read(&c, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    conn_close(&c);
    buf[n] = 0;
    int status = -1;
    char *body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) || !body || sscanf(buf + 9, "%d", &status) != 1) {
        if (n == 0 && read_fault[0])
            tls_refusal_or(NULL, 0);
        else
            fprintf(stderr, "sluice-sql: bad response from %s\n", target());
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
    "\\x                     Expanded display (psql's): toggles line mode, where\n"
    "                       JSON values (value_json, schema …) are pretty-printed\n"
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

/* psql's \x: line mode (one value a line, JSON pretty-printed) on and off. */
static int expanded(void)
{
    static int before = SQ_FMT_TABLE;
    if (sh.format == SQ_FMT_LINE) {
        sh.format = before;
    } else {
        before = sh.format;
        sh.format = SQ_FMT_LINE;
    }
    printf("Expanded display is %s.\n", sh.format == SQ_FMT_LINE ? "on" : "off");
    return 0;
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
        if (p[0] == '\\' && p[1] == 'x' && strspn(p + 2, " \t\r\n") == strlen(p + 2)) {
            *pending = false;
            return expanded();
        }
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
           sh.local ? "read-only, " : "admin endpoint ", sh.local ? sh.data_dir : target(),
           sh.local ? " (stopped broker)" : "");
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
        "usage: sluice-sql [-b [http[s]://]host:port | --socket PATH] [--user NAME\n"
        "                  [--password-file F]] [--token T | --token-file F]\n"
        "                  [--cacert F] [--cert F --key F] [-c SQL]\n"
        "                  [--format table|csv|json|line] [--headers on|off] [--data-dir DIR]\n"
        "\n"
        "SQL over a Sluice broker's admin endpoint (-b or $SLUICE_ADMIN), or its admin\n"
        "socket (--socket, $SLUICE_SOCKET: root and the broker's user need no\n"
        "credentials there); by default ./data/admin.sock if usable, else\n"
        "127.0.0.1:9644.  --user logs in with HTTP Basic: the password from\n"
        "$SLUICE_PASSWORD, --password-file, else a prompt on the terminal.  The\n"
        "admin.token from --token, $SLUICE_TOKEN, $SLUICE_ADMIN_TOKEN or --token-file.\n"
        "https:// verifies the broker with --cacert (else the system's CAs);\n"
        "--cert/--key present a client certificate.\n"
        "--data-dir opens a stopped broker's log.dirs read-only instead.\n"
        "Without -c: an interactive shell on a terminal, else statements from stdin.\n"
        "Tables and a cookbook: sql/README.md.\n");
}

/* The first line of a file (a password or token), without its newline;
 * NULL (said) when it cannot be read. */
static char *read_secret_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = f ? getline(&line, &cap, f) : -1;
    if (f)
        fclose(f);
    if (n < 0) {
        fprintf(stderr, "sluice-sql: cannot read %s: %s\n", path,
                f ? "it is empty" : strerror(errno));
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    return line;
}

/* The password typed on the terminal, not echoed; NULL without one. */
static char *prompt_password(const char *user)
{
    if (!isatty(0))
        return NULL;
    FILE *tty = fopen("/dev/tty", "r+");
    if (!tty)
        return NULL;
    struct termios old, quiet;
    bool restore = tcgetattr(fileno(tty), &old) == 0;
    if (restore) {
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        quiet.c_lflag |= ECHONL;
        tcsetattr(fileno(tty), TCSAFLUSH, &quiet);
    }
    fprintf(tty, "Password for %s: ", user);
    fflush(tty);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, tty);
    if (restore)
        tcsetattr(fileno(tty), TCSAFLUSH, &old);
    fclose(tty);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    return line;
}

/* sh.basic = base64(user:password); 0, or -1 (said). */
static int set_basic(const char *user, const char *password_file)
{
    char *pw = NULL;
    const char *env = getenv("SLUICE_PASSWORD");
    if (env)
        pw = strdup(env);
    else if (password_file)
        pw = read_secret_file(password_file);
    else
        pw = prompt_password(user);
    if (!pw) {
        if (!env && !password_file)
            fprintf(stderr, "sluice-sql: --user %s needs a password: $SLUICE_PASSWORD, "
                    "--password-file, or a terminal to type it on\n", user);
        return -1;
    }
    size_t ul = strlen(user), pl = strlen(pw), rl = ul + 1 + pl;
    unsigned char *raw = malloc(rl + 1);
    sh.basic = malloc(4 * (rl / 3 + 1) + 1);
    if (!raw || !sh.basic)
        abort();
    memcpy(raw, user, ul);
    raw[ul] = ':';
    memcpy(raw + ul + 1, pw, pl);
    EVP_EncodeBlock((unsigned char *)sh.basic, raw, (int)rl);
    OPENSSL_cleanse(raw, rl);
    OPENSSL_cleanse(pw, pl);
    free(raw);
    free(pw);
    return 0;
}

int main(int argc, char **argv)
{
    /* A peer that drops the connection (an https listener refusing a
     * handshake without a client certificate) is an error to report,
     * not a signal that kills the shell silently. */
    signal(SIGPIPE, SIG_IGN);
    const char *bootstrap = getenv("SLUICE_ADMIN");
    sh.socket = getenv("SLUICE_SOCKET");
    sh.token = getenv("SLUICE_TOKEN");
    if (!sh.token || !*sh.token)
        sh.token = getenv("SLUICE_ADMIN_TOKEN");
    const char *user = getenv("SLUICE_USER"), *password_file = NULL, *token_file = NULL;
    bool b_arg = false, socket_arg = false;       /* -b beats $SLUICE_SOCKET */
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
            b_arg = true;
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
        } else if (!strcmp(a, "--token-file") && v) {
            token_file = v; i++;
        } else if ((!strcmp(a, "--user") || !strcmp(a, "-u")) && v) {
            user = v; i++;
        } else if (!strcmp(a, "--password-file") && v) {
            password_file = v; i++;
        } else if (!strcmp(a, "--socket") && v) {
            sh.socket = v; i++;
            socket_arg = true;
        } else if (!strcmp(a, "--cacert") && v) {
            sh.cacert = v; i++;
        } else if (!strcmp(a, "--cert") && v) {
            sh.cert = v; i++;
        } else if (!strcmp(a, "--key") && v) {
            sh.key = v; i++;
        } else if (!strcmp(a, "--data-dir") && v) {
            sh.data_dir = v; i++;
        } else {
            fprintf(stderr, "sluice-sql: unknown or incomplete argument: %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (token_file && !(sh.token = read_secret_file(token_file)))
        return 2;
    if (sh.token && !*sh.token)
        sh.token = NULL;
    if ((sh.socket && !*sh.socket) || (b_arg && !socket_arg))
        sh.socket = NULL;
    if (user && *user && !sh.data_dir && set_basic(user, password_file))
        return 2;
    struct stat st;
    if ((!bootstrap || !*bootstrap) && !sh.socket && !lstat(DEFAULT_SOCKET, &st) &&
        S_ISSOCK(st.st_mode) && (st.st_uid == 0 || st.st_uid == geteuid()) &&
        !access(DEFAULT_SOCKET, W_OK))
        sh.socket = DEFAULT_SOCKET;       /* a broker started here with the default log.dirs,
                                             as root or as us: not one someone else planted */
    if (!bootstrap || !*bootstrap)
        bootstrap = "127.0.0.1:9644";
    sh.https = !strncasecmp(bootstrap, "https://", 8);
    if (sh.cert && !sh.key)
        sh.key = sh.cert;                   /* one PEM holding both */
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
