/*
 * admin/admin.h — the admin endpoint as sluiced starts and stops it.
 */
#ifndef SLUICE_ADMIN_H
#define SLUICE_ADMIN_H

#include "daemon/broker.h"

/* ---- admin HTTP: /sql, /metrics, /healthz (admin/admin_http.c) ---------------- */
/* Binds admin.listeners and the admin socket (admin.socket) and starts the
 * SQL workers; after gc_groups_init.  Refuses a non-loopback address
 * without admin.token or an authorizer.  0 or -1 with err. */
int  bk_admin_start(bk_broker *b, char *err, size_t errlen);
/* After the loop has stopped, before topics and groups are freed; removes
 * the admin socket's file. */
void bk_admin_stop(bk_broker *b);
/* GET /metrics' text of everything the loop thread owns (admin_metrics.c):
 * the broker's rooms and net/'s counters.  Loop thread. */
void bk_admin_metrics_render(bk_broker *b, kp_buf *out);

#endif
