/*
 * daemon/request.h — what an API handler receives and returns.
 *
 * Handlers never touch sockets: they read the request body through
 * r->body (a kp_rd over the frame) and write the response body into r->out
 * (a kp_buf); message bytes that come from segment files are spliced in
 * with net_req_add_range, which the connection code sends with sendfile.
 * Only daemon/net/net_server.c writes to Kafka clients' sockets (the admin HTTP
 * listener, admin/admin_http.c, answers through libevent's evhttp).
 */
#ifndef SLUICE_REQUEST_H
#define SLUICE_REQUEST_H

#include "daemon/broker.h"
#include "segments/seg.h"

/* ---- requests ----------------------------------------------------------------- */
enum { BK_RESPOND = 0, BK_DEFER = 1, BK_NO_RESPONSE = 2, BK_CLOSE = -1,
       BK_CLOSE_QUIET = -2,
       BK_RESPOND_CLOSE = 3 };   /* send the response, then close (a failed SASL login) */

typedef struct bk_piece {
    size_t at;                       /* position in out where the range goes */
    seg_range range;
} bk_piece;

typedef struct bk_req {
    bk_broker *b;
    bk_conn *conn;
    kp_req_hdr hdr;
    kp_rd body;                      /* cursor over the request body */
    kp_buf *out;                     /* response body, header excluded */
    bk_piece *pieces;                /* file ranges spliced into out */
    int npieces, cap_pieces;
    /* For deferred handlers: called if the connection dies first. */
    void (*cancel)(struct bk_req *r);
    /* For deferred handlers: answer now with what there is (shutdown). */
    void (*expire)(struct bk_req *r);
    void *state;                     /* handler's own, for deferral */
    bool raw;                        /* a raw SASL token's answer (sec_sasl.h):
                                        INT32 length and r->out, no header */
    int64_t received_us;
    /* Decoded messages (kp_dec_*: protocol/msgs.c) allocate here; reset
     * when the request is done, its newest chunk kept for the next one. */
    kp_arena arena;
} bk_req;

/* A handler parses r->body and writes the response body to r->out.
 * Returns BK_RESPOND (send it now), BK_DEFER (it will call net_req_finish
 * later; the connection processes no further request meanwhile, so
 * responses stay in order: net_server.c invariant 1), BK_NO_RESPONSE (acks=0),
 * or BK_CLOSE (malformed: close the
 * connection; BK_CLOSE_QUIET when the handler already logged why, e.g. a
 * failed acks=0 produce). */
typedef int (*bk_handler)(bk_req *r);

/* Splices a file range in at the current end of r->out; takes over the
 * range's reference. */
void net_req_add_range(bk_req *r, seg_range *range);
/* Completes a deferred request: sends its response, resumes the connection. */
void net_req_finish(bk_req *r);
/* Completes a deferred request that has no response (BK_NO_RESPONSE: an
 * acks=0 Produce that waited for its transaction's verification). */
void net_req_finish_silent(bk_req *r);
/* Completes a deferred request by closing the connection, after sending
 * the response if send (a failed SASL login: BK_RESPOND_CLOSE's way). */
void net_req_close(bk_req *r, bool send);
/* The client's address, "host:port". */
const char *net_conn_peer(const bk_conn *c);
/* The connection's number, 1, 2, ... in accept order; never reused, unlike
 * its address.  0 for NULL (a request on no connection). */
uint64_t net_conn_serial(const bk_conn *c);
/* Total bytes of ranges spliced so far. */
size_t net_req_range_bytes(const bk_req *r);
/* The client's host as Kafka prints it ("/127.0.0.1"; "" without a
 * connection), from net_conn_peer (daemon/broker_util.c, as the two below). */
void bk_req_client_host(bk_req *r, char *out, size_t cap);
/* n zeroed elements of a response array, from r->arena (freed when r is
 * answered); NULL when out of memory or n * size overflows. */
void *bk_req_alloc(bk_req *r, size_t n, size_t size);
/* The handler's answer once kp_enc_*Response returned rc: BK_RESPOND when
 * rc is 0; else logs the API by name and BK_CLOSE. */
int bk_req_encoded(bk_req *r, const char *api, int rc);
/* InitProducerId's first step (daemon/producer_ids.c P1): true when r waits
 * for a fresh read of the cluster's producer id floor (the handler returns
 * BK_DEFER; h runs again on r, from its body's start, when it is back);
 * false: go on (standalone, or the read is back). */
bool bk_producer_id_wait(bk_req *r, bk_handler h);

/* API table (daemon/api/api_dispatch.c). */
typedef struct bk_api {
    int16_t key;
    int16_t min_version, max_version;   /* advertised */
    bk_handler handler;
} bk_api;
const bk_api *api_find(int16_t key);
const bk_api *api_table(size_t *n);

/* Handlers, one file each or grouped by theme. */
int api_handle_api_versions(bk_req *r);
int api_handle_metadata(bk_req *r);
int api_handle_produce(bk_req *r);
/* daemon/api/api_txn_offset_commit.c */
int api_handle_txn_offset_commit(bk_req *r);
int api_handle_fetch(bk_req *r);
int api_handle_list_offsets(bk_req *r);
int api_handle_offset_for_leader_epoch(bk_req *r);
int api_handle_create_topics(bk_req *r);
int api_handle_delete_topics(bk_req *r);
int api_handle_create_partitions(bk_req *r);
int api_handle_describe_configs(bk_req *r);
int api_handle_alter_configs(bk_req *r);
int api_handle_incremental_alter_configs(bk_req *r);
int api_handle_delete_records(bk_req *r);
int api_handle_init_producer_id(bk_req *r);
/* The transaction coordinator's handlers (daemon/txn/txn_api.c). */
int txn_handle_add_partitions_to_txn(bk_req *r);
int txn_handle_add_offsets_to_txn(bk_req *r);
int txn_handle_end_txn(bk_req *r);
/* kafka-transactions.sh's (daemon/txn/txn_list.c) */
int txn_handle_describe_transactions(bk_req *r);
int txn_handle_list_transactions(bk_req *r);
int api_handle_write_txn_markers(bk_req *r);
int api_handle_describe_producers(bk_req *r);

/* A topic's configs as DescribeConfigs lists them (daemon/api/api_configs.c),
 * for CreateTopics v5+: fn per key with its effective value (NULL when
 * sensitive) and ConfigSource.  KP_NONE, or KP_UNKNOWN_SERVER_ERROR when
 * its overrides cannot be read. */
typedef void (*bk_config_entry_fn)(void *arg, const char *name, const char *value,
                                   int8_t source, bool sensitive);
int api_topic_configs_list(bk_broker *b, const char *topic, bk_config_entry_fn fn, void *arg);

/* The group coordinator's handlers (daemon/group/group_api.c; OffsetCommit
 * and OffsetFetch in group_offset_commit.c, OffsetDelete in
 * group_offset_delete.c). */
int gc_handle_find_coordinator(bk_req *r);
int gc_handle_join_group(bk_req *r);
int gc_handle_sync_group(bk_req *r);
int gc_handle_heartbeat(bk_req *r);
int gc_handle_leave_group(bk_req *r);
int gc_handle_offset_commit(bk_req *r);
int gc_handle_offset_fetch(bk_req *r);
int gc_handle_list_groups(bk_req *r);
int gc_handle_describe_groups(bk_req *r);
int gc_handle_delete_groups(bk_req *r);
int gc_handle_offset_delete(bk_req *r);
/* daemon/api/api_elect_leaders.c */
int api_handle_elect_leaders(bk_req *r);
/* daemon/api/api_reassign.c */
int api_handle_alter_partition_reassignments(bk_req *r);
int api_handle_list_partition_reassignments(bk_req *r);
/* The ACL APIs (daemon/api/api_acls.c). */
int api_handle_create_acls(bk_req *r);
int api_handle_describe_acls(bk_req *r);
int api_handle_delete_acls(bk_req *r);

/* SASL (daemon/security/sec_sasl.c) and its credentials (daemon/api/api_scram_credentials.c). */
int sec_handle_sasl_handshake(bk_req *r);
int sec_handle_sasl_authenticate(bk_req *r);
int api_handle_describe_user_scram_credentials(bk_req *r);
int api_handle_alter_user_scram_credentials(bk_req *r);


#endif
