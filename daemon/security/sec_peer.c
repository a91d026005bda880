/*
 * daemon/security/sec_peer.c — the names of the security protocols (sec_peer.h).
 *
 * Apart from daemon/net/net_server.c so that the configuration parser (broker_config.c)
 * and its fuzz target can name protocols without the connection code.
 */
#include "daemon/security/sec_peer.h"

#include <stddef.h>
#include <strings.h>

static const char *const secproto_names[] = {
    [BK_SEC_PLAINTEXT] = "PLAINTEXT", [BK_SEC_SSL] = "SSL",
    [BK_SEC_SASL_PLAINTEXT] = "SASL_PLAINTEXT", [BK_SEC_SASL_SSL] = "SASL_SSL",
};

int sec_secproto_parse(const char *name, bk_secproto *out)
{
    for (size_t i = 0; i < sizeof secproto_names / sizeof *secproto_names; i++)
        if (!strcasecmp(name, secproto_names[i])) {
            *out = (bk_secproto)i;
            return 0;
        }
    return -1;
}

const char *sec_secproto_name(bk_secproto p)
{
    return (unsigned)p < sizeof secproto_names / sizeof *secproto_names
           ? secproto_names[p] : "?";
}

bool sec_secproto_is_sasl(bk_secproto p)
{
    return p == BK_SEC_SASL_PLAINTEXT || p == BK_SEC_SASL_SSL;
}
