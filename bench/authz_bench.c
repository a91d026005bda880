/*
 * Authorization cost (issue 18, Performance): broker CPU per produce
 * request with 1,000 ACLs defined against none, same run; target: at most
 * 5 % more.
 *
 * Two brokers run side by side, both with the authorizer on and
 * allow.everyone.if.no.acl.found=true (so "none" is the authorizer with an
 * empty set, every request still checked): broker A keeps no ACL, broker B
 * gets 1,000 through one CreateAcls — 999 for other principals and
 * resources (literal and prefixed topics, groups; the kind of set a
 * multi-tenant cluster has) and one ALLOW WRITE for User:ANONYMOUS on the
 * bench topic, which every produce then needs.  A third broker, the
 * authorizer off, is measured too for the record.
 *
 * Each round sends REQUESTS Produce v7 requests (acks=1, one partition, a
 * 10-record batch of 100-byte values: small, so the check weighs as much
 * as it ever does) to each broker, in chunks of CHUNK taking turns, one
 * request in flight, and reads each broker's utime+stime (/proc/<pid>/stat)
 * around each chunk.  The figure is B's CPU over A's, summed over all
 * rounds.
 *
 *   build/bench/authz_bench [requests per round] [rounds]
 */
#include "bench/bench_common.h"

#include "kp_msgs.h"

#define NACLS 1000
#define TOPIC "authz-bench"
#define CHUNK 500

static int create_acls(int fd)
{
    kp_CreateAclsRequest_AclCreation *c = calloc(NACLS, sizeof *c);
    char (*names)[2][64] = calloc(NACLS, sizeof *names);
    if (!c || !names)
        return -1;
    for (int i = 0; i < NACLS - 1; i++) {
        snprintf(names[i][0], sizeof names[i][0], "%s-%d", i % 3 ? "tenant" : "team", i);
        snprintf(names[i][1], sizeof names[i][1], "User:u%d", i);
        c[i] = (kp_CreateAclsRequest_AclCreation){
            .ResourceType = i % 5 == 4 ? 3 : 2,                  /* GROUP / TOPIC */
            .ResourceName = kp_str_cstr(names[i][0]),
            .ResourcePatternType = i % 2 ? 4 : 3,                /* PREFIXED / LITERAL */
            .Principal = kp_str_cstr(names[i][1]), .Host = kp_str_cstr("*"),
            .Operation = (int8_t)(3 + i % 6), .PermissionType = i % 7 ? 3 : 2,
        };
    }
    c[NACLS - 1] = (kp_CreateAclsRequest_AclCreation){
        .ResourceType = 2, .ResourceName = kp_str_cstr(TOPIC), .ResourcePatternType = 3,
        .Principal = kp_str_cstr("User:ANONYMOUS"), .Host = kp_str_cstr("*"),
        .Operation = 4, .PermissionType = 3,                     /* WRITE, ALLOW */
    };
    kp_CreateAclsRequest m = { .Creations = c, .Creations_count = NACLS };
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    kp_req_hdr_write(&q, KP_API_CREATE_ACLS, 1, 1, "authz-bench");
    kp_enc_CreateAclsRequest(&q, 1, &m);
    int rc = bench_roundtrip(fd, &q, &r);
    if (rc == 0) {                              /* every result must be NONE */
        kp_rd rd;
        kp_rd_init(&rd, r.data, r.len);
        kp_rd_i32(&rd);                         /* correlation id */
        kp_CreateAclsResponse res;
        kp_arena a;
        kp_arena_init(&a, 0);
        rc = kp_dec_CreateAclsResponse(&rd, 1, &res, &a) != 0 || res.Results_count != NACLS;
        for (int32_t i = 0; !rc && i < res.Results_count; i++)
            rc = res.Results[i].ErrorCode != 0;
        kp_arena_free(&a);
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
    free(c);
    free(names);
    return rc ? -1 : 0;
}

/* Broker CPU seconds for n produce requests on fd. */
static double produce_cpu(bench_broker *b, int fd, int n, const kp_buf *batch)
{
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    double c0 = bench_cpu_seconds(b->pid);
    for (int i = 0; i < n; i++) {
        bench_produce_req(&q, i, "authz-bench", TOPIC, 1, batch);
        if (bench_roundtrip(fd, &q, &r) != 0 || bench_produce_error(&r) != 0) {
            fprintf(stderr, "authz_bench: produce failed on port %d\n", b->port);
            exit(1);
        }
    }
    double c1 = bench_cpu_seconds(b->pid);
    kp_buf_free(&q);
    kp_buf_free(&r);
    return c1 - c0;
}

int main(int argc, char **argv)
{
    int requests = argc > 1 ? atoi(argv[1]) : 40000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    bench_catch_signals(600);
    const char *const on[] = { "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                               "allow.everyone.if.no.acl.found=true", "admin.listeners=none",
                               NULL };
    const char *const off[] = { "admin.listeners=none", NULL };
    bench_broker br[3] = { { 0 } };
    const char *label[3] = { "no ACLs", "1,000 ACLs", "authorizer off" };
    int fd[3];
    kp_buf batch;
    if (bench_batch(&batch, 10, 100, 'a') != 0)
        return 1;
    for (int i = 0; i < 3; i++) {
        bench_broker_start(&br[i], i < 2 ? on : off);
        fd[i] = bench_connect(br[i].port);
        bench_set_timeout(fd[i], 30);
        if (fd[i] < 0 || bench_create_topic(fd[i], TOPIC, 1, NULL) != 0) {
            fprintf(stderr, "authz_bench: setting up broker %d failed\n", i);
            return 1;
        }
    }
    if (create_acls(fd[1]) != 0) {
        fprintf(stderr, "authz_bench: CreateAcls of %d ACLs failed\n", NACLS);
        return 1;
    }
    for (int i = 0; i < 3; i++)                 /* warm-up: page cache, caches */
        produce_cpu(&br[i], fd[i], requests / 10 + 1, &batch);
    /* Interleaved in chunks of CHUNK requests, broker after broker, so a
     * change in the machine's load (five other users here) falls on all
     * three alike; the ratio is of the sums.  Per-round ratios give the
     * spread. */
    double total[3] = { 0 }, ratio[64];
    if (rounds > 64)
        rounds = 64;
    for (int k = 0; k < rounds; k++) {
        double round[3] = { 0 };
        for (int done = 0; done < requests; done += CHUNK)
            for (int i = 0; i < 3; i++)
                round[i] += produce_cpu(&br[i], fd[i], CHUNK, &batch);
        for (int i = 0; i < 3; i++)
            total[i] += round[i];
        ratio[k] = round[1] / round[0];
    }
    int n = rounds * ((requests + CHUNK - 1) / CHUNK) * CHUNK;
    for (int i = 0; i < 3; i++)
        printf("authz: %-14s broker CPU per produce request %.2f µs (%d requests)\n", label[i],
               total[i] / n * 1e6, n);
    double r = total[1] / total[0];
    double lo = 1e9, hi = 0;
    for (int k = 0; k < rounds; k++) {
        lo = ratio[k] < lo ? ratio[k] : lo;
        hi = ratio[k] > hi ? ratio[k] : hi;
    }
    printf("authz: 1,000 ACLs / no ACLs = %.3f (%+.1f %%; target <= +5 %%; rounds from %.3f "
           "to %.3f)\n", r, (r - 1) * 100, lo, hi);
    printf("authz: no ACLs / authorizer off = %.3f (for the record)\n", total[0] / total[2]);
    for (int i = 0; i < 3; i++) {
        close(fd[i]);
        bench_broker_cleanup(&br[i]);
    }
    kp_buf_free(&batch);
    return 0;
}
