/*
 * nats-conformance-driver/2 for nats.c (libnats, as packaged by Debian).
 *
 * libnats's own checks before anything is written (NATS_INVALID_SUBJECT,
 * NATS_MAX_PAYLOAD, ...) answer `refused`; `invalid` is kept for a malformed
 * request. A status line, which libnats keeps as the pseudo-headers "Status"
 * and "Description", is reported as status/description and left out of the
 * headers. headers_op uses natsMsgHeader_Get/Values/Set/Delete/Add, which
 * match keys case-sensitively (nats.h: "Header keys are now case
 * sensitive"): the `insensitive` case is unsupported.
 *
 * Reads one JSON request per line on stdin, writes one JSON response per
 * line on stdout, and writes events (messages, async errors, closed) from
 * the library's threads in between. Every line goes out whole under one
 * mutex and is flushed at once. JSON is handled by jansson.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <nats/nats.h>

#define PROTOCOL "nats-conformance-driver/2"

/* What libnats supports through this driver: the connect options it takes
 * (natsOptions_SetVerbose, ...SetPedantic, ...SetNoEcho, ...SetUserInfo,
 * ...SetToken, ...DisableNoResponders), the header API and its internal
 * parser and encoder, nats_IsSubjectValid, JetStream and key-value
 * (natsConnection_JetStream, js_CreateKeyValue; libnats has no object store),
 * natsConnection_FlushTimeout, which sends PING and waits for the PONG, and TLS
 * after INFO (natsOptions_SetSecure, natsOptions_LoadCATrustedCertificates).
 * Debian's 3.4.1 has no TLS-first handshake (natsOptions_TLSHandshakeFirst is
 * not in its nats.h) and no WebSocket transport: tls_first, ws:// and wss://
 * are unsupported. */
static const char *CAPABILITIES[] = {
    "headers", "no_responders", "queue_groups", "request", "unsubscribe_max", "drain",
    "verbose", "pedantic", "echo", "user_password", "token", "validate_subject",
    "decode_headers", "encode_headers", "headers_op", "jetstream", "kv", "flush_roundtrip",
    "tls", NULL};
#define LIBRARY "nats.c"

/*
 * Functions libnats exports but leaves out of nats.h (from its msg.h, buf.h
 * and util.h). They are the library's own header-block parser and encoder
 * and its subject check, reachable without a server. The buffer is opaque
 * here: the driver hands it memory it owns and never reads the struct.
 */
typedef struct libnats_buffer libnats_buffer;
extern natsStatus natsMsg_create(natsMsg **newMsg, const char *subject, int subjLen,
                                 const char *reply, int replyLen, const char *buf,
                                 int bufLen, int hdrLen);
extern int natsMsgHeader_encodedLen(natsMsg *msg);
extern natsStatus natsMsgHeader_encode(libnats_buffer *buf, natsMsg *msg);
extern natsStatus natsBuf_CreateWithBackend(libnats_buffer **newBuf, char *data, int len,
                                            int capacity);
extern void natsBuf_Destroy(libnats_buffer *buf);
extern bool nats_IsSubjectValid(const char *subject, bool wcAllowed);

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
/* Set once exit starts: events the library still produces are dropped so
 * nothing follows the exit response. */
static bool out_closed = false;

/* Writes one JSON value as one line and consumes the reference. */
static void emit(json_t *obj, bool is_event)
{
    char *line = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (line == NULL) {
        fprintf(stderr, "driver: json_dumps failed\n");
        return;
    }
    pthread_mutex_lock(&out_mu);
    if (!(is_event && out_closed)) {
        fputs(line, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    pthread_mutex_unlock(&out_mu);
    free(line);
}

/* ------------------------------------------------------------------ */
/* Strings, UTF-8 and base64                                           */
/* ------------------------------------------------------------------ */

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 if there is none. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

/* A JSON string for bytes the library hands out (subjects, header fields,
 * error texts). They come from the wire and need not be UTF-8: each byte
 * that does not start a well-formed sequence becomes U+FFFD, as Python's
 * errors="replace" does. NULL becomes JSON null. */
static json_t *jstr(const char *s)
{
    if (s == NULL)
        return json_null();
    size_t n = strlen(s);
    json_t *j = json_stringn(s, n);
    if (j != NULL)
        return j;
    char *buf = malloc(n * 3 + 1);
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq_len(u + i, n - i);
        if (l == 0) {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(buf + o, u + i, l);
            o += l;
            i += l;
        }
    }
    j = json_stringn(buf, o);
    free(buf);
    return j;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *b64_encode(const unsigned char *data, size_t n)
{
    size_t outlen = 4 * ((n + 2) / 3);
    char *out = malloc(outlen + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < n)
            v |= data[i + 2];
        out[o++] = B64[(v >> 18) & 63];
        out[o++] = B64[(v >> 12) & 63];
        out[o++] = (i + 1 < n) ? B64[(v >> 6) & 63] : '=';
        out[o++] = (i + 2 < n) ? B64[v & 63] : '=';
    }
    json_t *j = json_stringn(out, o);
    free(out);
    return j;
}

static int b64_value(char c)
{
    const char *p = (c == '\0') ? NULL : strchr(B64, c);
    return p ? (int)(p - B64) : -1;
}

/* Strict RFC 4648 decoding: standard alphabet, padded, nothing else.
 * Returns a malloc'd buffer (NUL-terminated for convenience) or NULL. */
static char *b64_decode(const char *s, size_t n, size_t *outlen)
{
    if (n % 4 != 0)
        return NULL;
    char *out = malloc(n / 4 * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        bool last = (i + 4 == n);
        int pad = 0;
        if (last && s[i + 3] == '=')
            pad = (s[i + 2] == '=') ? 2 : 1;
        int v[4];
        for (int k = 0; k < 4 - pad; k++) {
            v[k] = b64_value(s[i + k]);
            if (v[k] < 0) {
                free(out);
                return NULL;
            }
        }
        for (int k = 4 - pad; k < 4; k++)
            v[k] = 0;
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        out[o++] = (char)(w >> 16);
        if (pad < 2)
            out[o++] = (char)(w >> 8);
        if (pad < 1)
            out[o++] = (char)w;
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static const char *status_type(natsStatus s)
{
    switch (s) {
    case NATS_TIMEOUT:
        return "timeout";
    case NATS_NO_RESPONDERS:
        return "no_responders";
    case NATS_CONNECTION_CLOSED:
    case NATS_NO_SERVER:
    case NATS_IO_ERROR:
    case NATS_STALE_CONNECTION:
    case NATS_SECURE_CONNECTION_WANTED:
    case NATS_SECURE_CONNECTION_REQUIRED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_SSL_ERROR:
    case NATS_NOT_YET_CONNECTED:
    case NATS_DRAINING:
        return "connection";
    case NATS_ADDRESS_MISSING:
    case NATS_INVALID_SUBJECT:
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBSCRIPTION:
    case NATS_INVALID_TIMEOUT:
    case NATS_INVALID_QUEUE_NAME:
    case NATS_MAX_PAYLOAD:
    case NATS_MAX_DELIVERED_MSGS:
        /* libnats's own checks, made before it writes anything. */
        return "refused";
    case NATS_PROTOCOL_ERROR:
    case NATS_LINE_TOO_LONG:
        return "protocol";
    default:
        return "other";
    }
}

static json_t *error_obj(const char *type, json_t *message)
{
    return json_pack("{s:s, s:o}", "type", type, "message", message);
}

/* A driver-level error (bad arguments, no connection, no such API). */
static json_t *err_drv(const char *type, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return error_obj(type, jstr(buf));
}

/* An error the library returned: its status name plus the calling thread's
 * last error text, which holds the library's detail (e.g. the server's
 * -ERR text). */
static json_t *err_lib(natsStatus s)
{
    natsStatus last = NATS_OK;
    const char *text = nats_GetLastError(&last);
    char buf[1024];
    if (text != NULL && text[0] != '\0' && last == s)
        snprintf(buf, sizeof buf, "%s: %s", natsStatus_GetText(s), text);
    else
        snprintf(buf, sizeof buf, "%s", natsStatus_GetText(s));
    return error_obj(status_type(s), jstr(buf));
}

/* ------------------------------------------------------------------ */
/* Request arguments                                                   */
/* ------------------------------------------------------------------ */

/* A string argument: absent or null gives *out = NULL when optional.
 * Strings are handed to a C API that stops at NUL, so U+0000 cannot be
 * passed: the API cannot express it (`unsupported`, a skip), rather than
 * the string being silently truncated. */
static json_t *arg_str(json_t *req, const char *key, bool optional, const char **out)
{
    json_t *v = json_object_get(req, key);
    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        if (optional)
            return NULL;
        return err_drv("invalid", "argument '%s' is required", key);
    }
    if (!json_is_string(v))
        return err_drv("invalid", "argument '%s' must be a string", key);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return err_drv("unsupported",
                       "argument '%s' contains U+0000, which the C API "
                       "(NUL-terminated strings) cannot take",
                       key);
    *out = json_string_value(v);
    return NULL;
}

/* An integer argument; *present tells whether it was given (not null). */
static json_t *arg_int(json_t *req, const char *key, bool optional, json_int_t *out,
                       bool *present)
{
    json_t *v = json_object_get(req, key);
    *present = false;
    if (v == NULL || json_is_null(v)) {
        if (optional)
            return NULL;
        return err_drv("invalid", "argument '%s' is required", key);
    }
    if (!json_is_integer(v))
        return err_drv("invalid", "argument '%s' must be an integer", key);
    *out = json_integer_value(v);
    *present = true;
    return NULL;
}

static json_t *arg_bool(json_t *obj, const char *key, bool dflt, bool *out)
{
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (v == NULL || json_is_null(v))
        return NULL;
    if (!json_is_boolean(v))
        return err_drv("invalid", "argument '%s' must be a boolean", key);
    *out = json_is_true(v);
    return NULL;
}

static json_t *arg_payload(json_t *req, const char *key, char **data, size_t *len)
{
    const char *s;
    json_t *err = arg_str(req, key, true, &s);
    *data = NULL;
    *len = 0;
    if (err != NULL)
        return err;
    if (s == NULL)
        s = "";
    *data = b64_decode(s, strlen(s), len);
    if (*data == NULL)
        return err_drv("invalid", "argument '%s' is not valid padded base64", key);
    return NULL;
}

/* Checks a [[name, value], ...] list; *headers = NULL when absent or null. */
static json_t *arg_headers(json_t *req, json_t **headers)
{
    json_t *h = json_object_get(req, "headers");
    *headers = NULL;
    if (h == NULL || json_is_null(h))
        return NULL;
    if (!json_is_array(h))
        return err_drv("invalid", "argument 'headers' must be a list of [name, value]");
    size_t i;
    json_t *pair;
    json_array_foreach(h, i, pair)
    {
        if (!json_is_array(pair) || json_array_size(pair) != 2)
            return err_drv("invalid", "headers[%zu] must be [name, value]", i);
        for (size_t k = 0; k < 2; k++) {
            json_t *s = json_array_get(pair, k);
            if (!json_is_string(s))
                return err_drv("invalid", "headers[%zu][%zu] must be a string", i, k);
            if (strlen(json_string_value(s)) != json_string_length(s))
                return err_drv("unsupported",
                               "headers[%zu][%zu] contains U+0000, which the C API "
                               "cannot take",
                               i, k);
        }
    }
    *headers = h;
    return NULL;
}

/* Adds the pairs in order with natsMsgHeader_Add, so a repeated name keeps
 * every value in order (natsMsgHeader_Set would replace). */
static json_t *add_headers(natsMsg *m, json_t *headers)
{
    size_t i;
    json_t *pair;
    json_array_foreach(headers, i, pair)
    {
        natsStatus s = natsMsgHeader_Add(m, json_string_value(json_array_get(pair, 0)),
                                         json_string_value(json_array_get(pair, 1)));
        if (s != NATS_OK)
            return err_lib(s);
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Messages as JSON                                                    */
/* ------------------------------------------------------------------ */

/* The status line of m's header block, which libnats keeps as the
 * pseudo-headers "Status" (the code) and "Description" (the text): *status
 * is the code or -1, *description the text or NULL. A real header named
 * Status with a numeric value looks the same, as it does to libnats. */
static void status_line(natsMsg *m, int *status, const char **description)
{
    const char *code = NULL, *text = NULL;
    *status = -1;
    *description = NULL;
    if (natsMsgHeader_Get(m, "Status", &code) != NATS_OK || code == NULL || code[0] == '\0' ||
        strlen(code) > 3 || strspn(code, "0123456789") != strlen(code))
        return;
    *status = atoi(code);
    if (natsMsgHeader_Get(m, "Description", &text) == NATS_OK && text != NULL && text[0] != '\0')
        *description = text;
}

/* [[name, value], ...] as libnats presents them: names in the order
 * natsMsgHeader_Keys gives, each name's values in natsMsgHeader_Values
 * order. With split, a status line (see status_line) is left out: the first
 * value of "Status", and of "Description" if it gave the description.
 * NOT_FOUND (no header block, or an empty one) gives JSON null. */
static natsStatus headers_json(natsMsg *m, json_t **out, bool split)
{
    const char **keys = NULL;
    int nkeys = 0;
    int status = -1;
    const char *description = NULL;
    if (split)
        status_line(m, &status, &description);
    *out = json_null();
    natsStatus s = natsMsgHeader_Keys(m, &keys, &nkeys);
    if (s == NATS_NOT_FOUND)
        return NATS_OK;
    if (s != NATS_OK)
        return s;
    json_t *list = json_array();
    for (int i = 0; i < nkeys && s == NATS_OK; i++) {
        const char **vals = NULL;
        int nvals = 0;
        s = natsMsgHeader_Values(m, keys[i], &vals, &nvals);
        int first = 0;
        if ((status >= 0 && strcmp(keys[i], "Status") == 0) ||
            (description != NULL && strcmp(keys[i], "Description") == 0))
            first = 1;
        for (int k = first; s == NATS_OK && k < nvals; k++)
            json_array_append_new(list, json_pack("[o,o]", jstr(keys[i]), jstr(vals[k])));
        free((void *)vals);
    }
    free((void *)keys);
    if (s != NATS_OK) {
        json_decref(list);
        return s;
    }
    json_decref(*out);
    *out = list;
    return NATS_OK;
}

/* The status/description pair of m as JSON (null, null without a status line). */
static json_t *status_json(natsMsg *m, json_t **description)
{
    int status;
    const char *text;
    status_line(m, &status, &text);
    *description = text != NULL ? jstr(text) : json_null();
    return status >= 0 ? json_integer(status) : json_null();
}

/* subject, reply, headers, status, description, payload_b64. The status
 * line comes from libnats's "Status"/"Description" pseudo-headers and is
 * left out of headers. If the library's header parser fails, headers are
 * null and *hdr_err carries its error. */
static json_t *message_json(natsMsg *m, json_t **hdr_err)
{
    json_t *headers, *description;
    natsStatus s = headers_json(m, &headers, true);
    *hdr_err = (s == NATS_OK) ? NULL : err_lib(s);
    json_t *status = status_json(m, &description);
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "subject", jstr(natsMsg_GetSubject(m)),
                     "reply", jstr(natsMsg_GetReply(m)), "headers", headers, "status", status,
                     "description", description, "payload_b64",
                     b64_encode((const unsigned char *)natsMsg_GetData(m),
                                (size_t)natsMsg_GetDataLength(m)));
}

static void emit_error_event(json_t *err)
{
    json_object_set_new(err, "event", json_string("error"));
    emit(err, true);
}

/* ------------------------------------------------------------------ */
/* Connection and subscriptions                                        */
/* ------------------------------------------------------------------ */

/* One per connect. Never freed: a late callback may still hold it. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool closed;
} conn_state;

typedef struct {
    char handle[32];
    natsSubscription *sub;
} sub_entry;

static natsConnection *nc = NULL;
static conn_state *cs = NULL;
static sub_entry **subs = NULL;
static size_t nsubs = 0, capsubs = 0;
static unsigned long next_sub = 1;

static void on_closed(natsConnection *c, void *closure)
{
    conn_state *st = closure;
    const char *text = NULL;
    /* A close the server caused (e.g. an -ERR) leaves its reason as the
     * connection's last error; report it before the closed event. */
    natsStatus s = natsConnection_GetLastError(c, &text);
    if (s != NATS_OK && s != NATS_CONNECTION_CLOSED) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s: %s", natsStatus_GetText(s), text ? text : "");
        emit_error_event(error_obj(status_type(s), jstr(buf)));
    }
    emit(json_pack("{s:s}", "event", "closed"), true);
    pthread_mutex_lock(&st->mu);
    st->closed = true;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->mu);
}

/* The error handler gets a status and the subscription, no text. The
 * connection's last error holds the detail (e.g. the -ERR text), but it is
 * read when the callback runs, so a later error may have replaced it: the
 * message says which is which. */
static void on_error(natsConnection *c, natsSubscription *sub, natsStatus err, void *closure)
{
    (void)closure;
    const char *text = NULL;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s", natsStatus_GetText(err));
    if (sub != NULL && natsSubscription_GetSubject(sub) != NULL)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " (subscription on '%s')",
                      natsSubscription_GetSubject(sub));
    if (natsConnection_GetLastError(c, &text) != NATS_OK && text != NULL && text[0] != '\0')
        snprintf(buf + n, sizeof buf - (size_t)n, "; last error on the connection: %s", text);
    emit_error_event(error_obj(status_type(err), jstr(buf)));
}

static void on_disconnected(natsConnection *c, void *closure)
{
    (void)c;
    (void)closure;
    fprintf(stderr, "driver: disconnected\n");
}

static void on_message(natsConnection *c, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)c;
    (void)sub;
    sub_entry *e = closure;
    json_t *hdr_err;
    json_t *ev = message_json(m, &hdr_err);
    natsMsg_Destroy(m);
    if (hdr_err != NULL)
        emit_error_event(hdr_err);
    json_object_set_new(ev, "event", json_string("message"));
    json_object_set_new(ev, "sub", json_string(e->handle));
    emit(ev, true);
}

/* Waits (bounded) until the library has reported the connection closed. */
static bool wait_closed(conn_state *st, int seconds)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    pthread_mutex_lock(&st->mu);
    int rc = 0;
    while (!st->closed && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&st->cond, &st->mu, &deadline);
    bool closed = st->closed;
    pthread_mutex_unlock(&st->mu);
    return closed;
}

/* Closes (if still open) and frees the current connection and its subs. */
static void drop_connection(void)
{
    if (nc == NULL)
        return;
    natsConnection_Close(nc);
    wait_closed(cs, 5);
    for (size_t i = 0; i < nsubs; i++) {
        if (subs[i]->sub != NULL) {
            natsSubscription_Destroy(subs[i]->sub);
            subs[i]->sub = NULL;
        }
    }
    natsConnection_Destroy(nc);
    nc = NULL;
    cs = NULL;
}

static json_t *need_conn(void)
{
    if (nc == NULL)
        return err_drv("connection", "not connected (no connect request yet)");
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Commands                                                            */
/* ------------------------------------------------------------------ */

typedef json_t *(*handler_fn)(json_t *req, json_t **err);

static json_t *cmd_hello(json_t *req, json_t **err)
{
    (void)req;
    (void)err;
    json_t *capabilities = json_array();
    for (int i = 0; CAPABILITIES[i] != NULL; i++)
        json_array_append_new(capabilities, json_string(CAPABILITIES[i]));
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "protocol", PROTOCOL, "library", LIBRARY,
                     "version", nats_GetVersion(), "language", "C (gcc " __VERSION__ ")",
                     "capabilities", capabilities);
}

/* Applies the connect options the protocol names; unknown ones and
 * headers=false (libnats has no switch to turn headers off) are refused. */
static json_t *apply_options(natsOptions *opts, json_t *o)
{
    static const char *known[] = {"name",          "verbose",    "pedantic",  "echo",
                                  "headers",       "user",       "pass",      "token",
                                  "no_responders", "timeout_ms", "reconnect", "tls_ca_file",
                                  "tls_first",     "ws_compression", NULL};
    const char *key;
    json_t *val;
    json_object_foreach(o, key, val)
    {
        bool ok = false;
        for (int i = 0; known[i] != NULL; i++)
            ok = ok || strcmp(key, known[i]) == 0;
        if (!ok)
            return err_drv("unsupported", "connect option '%s' is not supported", key);
    }
    json_t *err;
    bool b;
    natsStatus s = NATS_OK;
    const char *str, *pass;
    json_int_t n;
    bool present;

    if ((err = arg_str(o, "name", true, &str)) != NULL)
        return err;
    if (str != NULL && (s = natsOptions_SetName(opts, str)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_bool(o, "verbose", false, &b)) != NULL)
        return err;
    if ((s = natsOptions_SetVerbose(opts, b)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_bool(o, "pedantic", false, &b)) != NULL)
        return err;
    if ((s = natsOptions_SetPedantic(opts, b)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_bool(o, "echo", true, &b)) != NULL)
        return err;
    if ((s = natsOptions_SetNoEcho(opts, !b)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_bool(o, "headers", true, &b)) != NULL)
        return err;
    if (!b)
        return err_drv("unsupported", "libnats has no option to turn headers off");
    if ((err = arg_bool(o, "no_responders", true, &b)) != NULL)
        return err;
    if ((s = natsOptions_DisableNoResponders(opts, !b)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_str(o, "user", true, &str)) != NULL)
        return err;
    if ((err = arg_str(o, "pass", true, &pass)) != NULL)
        return err;
    if ((str != NULL || pass != NULL) &&
        (s = natsOptions_SetUserInfo(opts, str, pass)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_str(o, "token", true, &str)) != NULL)
        return err;
    if (str != NULL && (s = natsOptions_SetToken(opts, str)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_int(o, "timeout_ms", true, &n, &present)) != NULL)
        return err;
    if (present && (s = natsOptions_SetTimeout(opts, (int64_t)n)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_bool(o, "reconnect", false, &b)) != NULL)
        return err;
    if ((s = natsOptions_SetAllowReconnect(opts, b)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_str(o, "tls_ca_file", true, &str)) != NULL)
        return err;
    if (str != NULL && (s = natsOptions_LoadCATrustedCertificates(opts, str)) != NATS_OK)
        return err_lib(s);
    if ((err = arg_bool(o, "tls_first", false, &b)) != NULL)
        return err;
    if (b)
        return err_drv("unsupported",
                       "libnats %s has no TLS-first handshake (no natsOptions_TLSHandshakeFirst)",
                       nats_GetVersion());
    if ((err = arg_bool(o, "ws_compression", false, &b)) != NULL)
        return err;
    if (b)
        return err_drv("unsupported", "libnats has no WebSocket transport");
    return NULL;
}

/* The transport the URL's scheme names: nats:// as it is, tls:// through
 * natsOptions_SetSecure (TLS after INFO, refused by the library when the
 * server offers none); ws:// and wss:// are refused, since libnats would dial
 * them as plain NATS over TCP. */
static json_t *apply_scheme(natsOptions *opts, const char *url)
{
    if (strncmp(url, "ws://", 5) == 0 || strncmp(url, "wss://", 6) == 0)
        return err_drv("unsupported", "libnats has no WebSocket transport");
    natsStatus s;
    if (strncmp(url, "tls://", 6) == 0 && (s = natsOptions_SetSecure(opts, true)) != NATS_OK)
        return err_lib(s);
    return NULL;
}

static json_t *cmd_connect(json_t *req, json_t **err)
{
    const char *url;
    if ((*err = arg_str(req, "url", false, &url)) != NULL)
        return NULL;
    json_t *o = json_object_get(req, "options");
    if (o != NULL && !json_is_null(o) && !json_is_object(o)) {
        *err = err_drv("invalid", "argument 'options' must be an object");
        return NULL;
    }
    drop_connection();

    natsOptions *opts = NULL;
    natsStatus s = natsOptions_Create(&opts);
    if (s != NATS_OK) {
        *err = err_lib(s);
        return NULL;
    }
    conn_state *st = calloc(1, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cond, NULL);
    s = natsOptions_SetURL(opts, url);
    if (s == NATS_OK)
        s = natsOptions_SetClosedCB(opts, on_closed, st);
    if (s == NATS_OK)
        s = natsOptions_SetDisconnectedCB(opts, on_disconnected, NULL);
    if (s == NATS_OK)
        s = natsOptions_SetErrorHandler(opts, on_error, NULL);
    if (s != NATS_OK)
        *err = err_lib(s);
    else {
        json_t *given = (o == NULL || json_is_null(o)) ? json_object() : json_incref(o);
        *err = apply_scheme(opts, url);
        if (*err == NULL)
            *err = apply_options(opts, given);
        json_decref(given);
    }
    if (*err == NULL) {
        s = natsConnection_Connect(&nc, opts);
        if (s != NATS_OK) {
            *err = err_lib(s);
            nc = NULL;
        } else
            cs = st;
    }
    natsOptions_Destroy(opts);
    return *err == NULL ? json_object() : NULL;
}

static json_t *cmd_publish(json_t *req, json_t **err)
{
    const char *subject, *reply;
    json_t *headers;
    char *data = NULL;
    size_t len;
    if ((*err = arg_str(req, "subject", false, &subject)) != NULL ||
        (*err = arg_str(req, "reply", true, &reply)) != NULL ||
        (*err = arg_headers(req, &headers)) != NULL ||
        (*err = arg_payload(req, "payload_b64", &data, &len)) != NULL ||
        (*err = need_conn()) != NULL) {
        free(data);
        return NULL;
    }
    natsMsg *m = NULL;
    natsStatus s = natsMsg_Create(&m, subject, reply, data, (int)len);
    free(data);
    if (s != NATS_OK) {
        *err = err_lib(s);
        return NULL;
    }
    if (headers != NULL)
        *err = add_headers(m, headers);
    if (*err == NULL && (s = natsConnection_PublishMsg(nc, m)) != NATS_OK)
        *err = err_lib(s);
    natsMsg_Destroy(m);
    return *err == NULL ? json_object() : NULL;
}

static json_t *cmd_subscribe(json_t *req, json_t **err)
{
    const char *subject, *queue;
    if ((*err = arg_str(req, "subject", false, &subject)) != NULL ||
        (*err = arg_str(req, "queue", true, &queue)) != NULL || (*err = need_conn()) != NULL)
        return NULL;
    sub_entry *e = calloc(1, sizeof *e);
    snprintf(e->handle, sizeof e->handle, "s%lu", next_sub);
    natsStatus s;
    if (queue == NULL)
        s = natsConnection_Subscribe(&e->sub, nc, subject, on_message, e);
    else
        s = natsConnection_QueueSubscribe(&e->sub, nc, subject, queue, on_message, e);
    if (s != NATS_OK) {
        free(e);
        *err = err_lib(s);
        return NULL;
    }
    next_sub++;
    if (nsubs == capsubs) {
        capsubs = capsubs ? capsubs * 2 : 16;
        subs = realloc(subs, capsubs * sizeof *subs);
    }
    subs[nsubs++] = e;
    return json_pack("{s:s}", "sub", e->handle);
}

static json_t *cmd_unsubscribe(json_t *req, json_t **err)
{
    const char *handle;
    json_int_t max;
    bool has_max;
    if ((*err = arg_str(req, "sub", false, &handle)) != NULL ||
        (*err = arg_int(req, "max", true, &max, &has_max)) != NULL)
        return NULL;
    sub_entry *e = NULL;
    for (size_t i = 0; i < nsubs && e == NULL; i++)
        if (strcmp(subs[i]->handle, handle) == 0)
            e = subs[i];
    if (e == NULL || e->sub == NULL) {
        *err = err_drv("invalid", "unknown subscription handle '%s'", handle);
        return NULL;
    }
    if (has_max && (max < INT32_MIN || max > INT32_MAX)) {
        *err = err_drv("invalid", "argument 'max' does not fit the C API's int");
        return NULL;
    }
    natsStatus s = has_max ? natsSubscription_AutoUnsubscribe(e->sub, (int)max)
                           : natsSubscription_Unsubscribe(e->sub);
    if (s != NATS_OK) {
        *err = err_lib(s);
        return NULL;
    }
    return json_object();
}

static json_t *cmd_request(json_t *req, json_t **err)
{
    const char *subject;
    json_t *headers;
    char *data = NULL;
    size_t len;
    json_int_t timeout;
    bool has_timeout;
    if ((*err = arg_str(req, "subject", false, &subject)) != NULL ||
        (*err = arg_headers(req, &headers)) != NULL ||
        (*err = arg_int(req, "timeout_ms", false, &timeout, &has_timeout)) != NULL ||
        (*err = arg_payload(req, "payload_b64", &data, &len)) != NULL ||
        (*err = need_conn()) != NULL) {
        free(data);
        return NULL;
    }
    natsMsg *m = NULL, *reply = NULL;
    natsStatus s = natsMsg_Create(&m, subject, NULL, data, (int)len);
    free(data);
    if (s != NATS_OK) {
        *err = err_lib(s);
        return NULL;
    }
    if (headers != NULL)
        *err = add_headers(m, headers);
    if (*err == NULL && (s = natsConnection_RequestMsg(&reply, nc, m, (int64_t)timeout)) != NATS_OK)
        *err = err_lib(s);
    natsMsg_Destroy(m);
    if (*err != NULL)
        return NULL;
    json_t *msg = message_json(reply, err);
    natsMsg_Destroy(reply);
    if (*err != NULL) {
        json_decref(msg);
        return NULL;
    }
    return json_pack("{s:o}", "message", msg);
}

static json_t *cmd_flush(json_t *req, json_t **err)
{
    json_int_t timeout;
    bool has_timeout;
    if ((*err = arg_int(req, "timeout_ms", true, &timeout, &has_timeout)) != NULL ||
        (*err = need_conn()) != NULL)
        return NULL;
    natsStatus s = has_timeout ? natsConnection_FlushTimeout(nc, (int64_t)timeout)
                               : natsConnection_Flush(nc);
    if (s != NATS_OK) {
        *err = err_lib(s);
        return NULL;
    }
    return json_object();
}

/* Closes or drains, then waits for the library's closed callback, so the
 * closed event comes before this response. The connection object is kept
 * (closed) until the next connect, so later commands get libnats's own
 * "connection closed" answers. */
static json_t *cmd_close(json_t *req, json_t **err)
{
    bool drain;
    if ((*err = arg_bool(req, "drain", false, &drain)) != NULL)
        return NULL;
    if (nc == NULL)
        return json_object();
    if (drain) {
        natsStatus s = natsConnection_Drain(nc);
        if (s != NATS_OK) {
            *err = err_lib(s);
            return NULL;
        }
        /* The library's default drain timeout is 30 s. */
        if (!wait_closed(cs, 35)) {
            *err = err_drv("timeout", "drain did not close the connection within 35 s");
            return NULL;
        }
        return json_object();
    }
    natsConnection_Close(nc);
    if (!wait_closed(cs, 5)) {
        *err = err_drv("timeout", "libnats did not report the connection closed within 5 s");
        return NULL;
    }
    return json_object();
}

static json_t *cmd_decode_headers(json_t *req, json_t **err)
{
    char *block = NULL;
    size_t len;
    if ((*err = arg_payload(req, "block_b64", &block, &len)) != NULL)
        return NULL;
    if (len > INT32_MAX) {
        free(block);
        *err = err_drv("invalid", "block too large");
        return NULL;
    }
    /* A received message as the parser builds it (HMSG with HDR_LEN ==
     * TOTAL_LEN); natsMsgHeader_Keys then lifts the block with libnats's
     * own parser. */
    natsMsg *m = NULL;
    natsStatus s = natsMsg_create(&m, "_", 1, NULL, 0, block, (int)len, (int)len);
    free(block);
    if (s != NATS_OK) {
        *err = err_lib(s);
        return NULL;
    }
    json_t *headers, *description;
    s = headers_json(m, &headers, true);
    if (s != NATS_OK) {
        natsMsg_Destroy(m);
        *err = err_lib(s);
        return NULL;
    }
    json_t *status = status_json(m, &description);
    natsMsg_Destroy(m);
    if (json_is_null(headers)) {
        json_decref(headers);
        headers = json_array();
    }
    return json_pack("{s:o, s:o, s:o}", "status", status, "description", description, "headers",
                     headers);
}

/* One operation through libnats's header API on a message built from the
 * pairs (natsMsgHeader_Add, in order). */
static json_t *cmd_headers_op(json_t *req, json_t **err)
{
    json_t *headers;
    const char *match, *op, *key, *value;
    if ((*err = arg_headers(req, &headers)) != NULL ||
        (*err = arg_str(req, "case", false, &match)) != NULL ||
        (*err = arg_str(req, "op", false, &op)) != NULL ||
        (*err = arg_str(req, "key", false, &key)) != NULL ||
        (*err = arg_str(req, "value", true, &value)) != NULL)
        return NULL;
    if (headers == NULL) {
        *err = err_drv("invalid", "argument 'headers' is required");
        return NULL;
    }
    if (strcmp(match, "sensitive") != 0) {
        *err = err_drv("unsupported", "libnats matches header keys case-sensitively only");
        return NULL;
    }
    natsMsg *m = NULL;
    natsStatus s = natsMsg_Create(&m, "_", NULL, NULL, 0);
    if (s != NATS_OK) {
        *err = err_lib(s);
        return NULL;
    }
    if ((*err = add_headers(m, headers)) != NULL) {
        natsMsg_Destroy(m);
        return NULL;
    }
    json_t *result = NULL;
    if (strcmp(op, "get") == 0) {
        const char *got = NULL;
        s = natsMsgHeader_Get(m, key, &got);
        if (s == NATS_OK || s == NATS_NOT_FOUND)
            result = json_pack("{s:o}", "value", s == NATS_OK ? jstr(got) : json_null());
    } else if (strcmp(op, "values") == 0) {
        const char **vals = NULL;
        int nvals = 0;
        s = natsMsgHeader_Values(m, key, &vals, &nvals);
        if (s == NATS_OK || s == NATS_NOT_FOUND) {
            json_t *list = json_array();
            for (int k = 0; s == NATS_OK && k < nvals; k++)
                json_array_append_new(list, jstr(vals[k]));
            result = json_pack("{s:o}", "values", list);
        }
        free((void *)vals);
    } else if (strcmp(op, "set") == 0 || strcmp(op, "append") == 0 ||
               strcmp(op, "delete") == 0) {
        if (op[0] == 's')
            s = natsMsgHeader_Set(m, key, value != NULL ? value : "");
        else if (op[0] == 'a')
            s = natsMsgHeader_Add(m, key, value != NULL ? value : "");
        else
            s = natsMsgHeader_Delete(m, key);
        if (s == NATS_NOT_FOUND) /* deleting an absent key leaves the headers as they are */
            s = NATS_OK;
        json_t *pairs = NULL;
        if (s == NATS_OK)
            s = headers_json(m, &pairs, false);
        if (s == NATS_OK) {
            if (json_is_null(pairs)) {
                json_decref(pairs);
                pairs = json_array();
            }
            result = json_pack("{s:o}", "headers", pairs);
        }
    } else {
        *err = err_drv("invalid", "unknown headers_op op '%s'", op);
        natsMsg_Destroy(m);
        return NULL;
    }
    if (result == NULL)
        *err = err_lib(s);
    natsMsg_Destroy(m);
    return result;
}

static json_t *cmd_encode_headers(json_t *req, json_t **err)
{
    json_t *headers;
    if ((*err = arg_headers(req, &headers)) != NULL)
        return NULL;
    if (headers == NULL) {
        *err = err_drv("invalid", "argument 'headers' is required");
        return NULL;
    }
    natsMsg *m = NULL;
    natsStatus s = natsMsg_Create(&m, "_", NULL, NULL, 0);
    if (s != NATS_OK) {
        *err = err_lib(s);
        return NULL;
    }
    if ((*err = add_headers(m, headers)) != NULL) {
        natsMsg_Destroy(m);
        return NULL;
    }
    /* The same two calls natsConnection_PublishMsg makes. The buffer is
     * given exactly encodedLen bytes of our memory, which the encoder fills
     * without growing it. */
    int len = natsMsgHeader_encodedLen(m);
    char *data = malloc((size_t)len + 1);
    libnats_buffer *buf = NULL;
    s = natsBuf_CreateWithBackend(&buf, data, 0, len + 1);
    if (s == NATS_OK)
        s = natsMsgHeader_encode(buf, m);
    natsBuf_Destroy(buf);
    natsMsg_Destroy(m);
    json_t *result = NULL;
    if (s != NATS_OK)
        *err = err_lib(s);
    else
        result = json_pack("{s:o}", "block_b64", b64_encode((unsigned char *)data, (size_t)len));
    free(data);
    return result;
}

static json_t *cmd_validate_subject(json_t *req, json_t **err)
{
    const char *subject, *use;
    if ((*err = arg_str(req, "subject", false, &subject)) != NULL ||
        (*err = arg_str(req, "use", false, &use)) != NULL)
        return NULL;
    bool wildcards;
    if (strcmp(use, "publish") == 0)
        wildcards = false;
    else if (strcmp(use, "subscribe") == 0)
        wildcards = true;
    else {
        *err = err_drv("invalid", "argument 'use' must be \"publish\" or \"subscribe\"");
        return NULL;
    }
    return json_pack("{s:b}", "valid", nats_IsSubjectValid(subject, wildcards));
}

static json_t *cmd_validate_name(json_t *req, json_t **err)
{
    (void)req;
    *err = err_drv("unsupported", "libnats exposes no validation of ADR-6 names");
    return NULL;
}

/* ------------------------------------------------------------------ */
/* JetStream: jetstream_create and jetstream_delete                    */
/* ------------------------------------------------------------------ */

#define JS_MAX_SUBJECTS 16
#define JS_WAIT_MS 5000

/* A failed JetStream call: a server API error (jerr, the server's
 * err_code; js_CreateKeyValue gives none and returns NATS_ERR with the
 * server's description) is `protocol`, with the library's text of it
 * (libnats keeps no HTTP-like code); otherwise the status's type
 * (NATS_INVALID_ARG: the library's own check, before sending: `refused`). */
static json_t *err_js(natsStatus s, jsErrCode jerr)
{
    if (jerr == 0 && s != NATS_ERR)
        return err_lib(s);
    const char *text = nats_GetLastError(NULL);
    char buf[1024];
    if (jerr != 0)
        snprintf(buf, sizeof buf, "err_code %d: %s", (int)jerr, text != NULL ? text : "");
    else
        snprintf(buf, sizeof buf, "%s", text != NULL ? text : natsStatus_GetText(s));
    return error_obj("protocol", jstr(buf));
}

/* The request's kind, name and stream, and a JetStream context on the
 * connection; NULL, or the error. */
static json_t *js_args(json_t *req, const char **kind, const char **name, const char **stream,
                       jsCtx **js)
{
    json_t *e;
    if ((e = arg_str(req, "kind", false, kind)) || (e = arg_str(req, "name", false, name)) ||
        (e = arg_str(req, "stream", true, stream)) || (e = need_conn()))
        return e;
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = JS_WAIT_MS;
    natsStatus s = natsConnection_JetStream(js, nc, &o);
    return s == NATS_OK ? NULL : err_lib(s);
}

static json_t *js_create(jsCtx *js, json_t *req, const char *kind, const char *name,
                         const char *stream, json_t **err)
{
    natsStatus s;
    jsErrCode jerr = 0;
    json_t *created = NULL;
    if (strcmp(kind, "stream") == 0) {
        const char *subjects[JS_MAX_SUBJECTS];
        json_t *list = json_object_get(req, "subjects");
        size_t n = json_is_array(list) ? json_array_size(list) : 0;
        if (n > JS_MAX_SUBJECTS) {
            *err = err_drv("invalid", "at most %d subjects", JS_MAX_SUBJECTS);
            return NULL;
        }
        for (size_t i = 0; i < n; i++) {
            subjects[i] = json_string_value(json_array_get(list, i));
            if (subjects[i] == NULL) {
                *err = err_drv("invalid", "subjects are strings");
                return NULL;
            }
        }
        jsStreamConfig cfg;
        jsStreamInfo *si = NULL;
        jsStreamConfig_Init(&cfg);
        cfg.Name = name;
        cfg.Subjects = subjects;
        cfg.SubjectsLen = (int)n;
        s = js_AddStream(&si, js, &cfg, NULL, &jerr);
        if (s == NATS_OK)
            created = jstr(si->Config->Name);
        jsStreamInfo_Destroy(si);
    } else if (strcmp(kind, "consumer") == 0 || strcmp(kind, "durable") == 0) {
        jsConsumerConfig cfg;
        jsConsumerInfo *ci = NULL;
        jsConsumerConfig_Init(&cfg);
        cfg.AckPolicy = js_AckExplicit;
        if (strcmp(kind, "consumer") == 0)
            cfg.Name = name;
        else
            cfg.Durable = name;
        s = js_AddConsumer(&ci, js, stream, &cfg, NULL, &jerr);
        if (s == NATS_OK)
            created = jstr(ci->Name);
        jsConsumerInfo_Destroy(ci);
    } else if (strcmp(kind, "kv") == 0) {
        kvConfig cfg;
        kvStore *kv = NULL;
        kvConfig_Init(&cfg);
        cfg.Bucket = name;
        s = js_CreateKeyValue(&kv, js, &cfg);
        if (s == NATS_OK)
            created = jstr(kvStore_Bucket(kv));
        kvStore_Destroy(kv);
    } else {
        *err = err_drv(strcmp(kind, "object_store") == 0 ? "unsupported" : "invalid",
                       "libnats has no '%s' API", kind);
        return NULL;
    }
    if (s != NATS_OK) {
        *err = err_js(s, jerr);
        return NULL;
    }
    return json_pack("{s:o}", "created", created);
}

static json_t *cmd_jetstream_create(json_t *req, json_t **err)
{
    const char *kind, *name, *stream;
    jsCtx *js = NULL;
    if ((*err = js_args(req, &kind, &name, &stream, &js)))
        return NULL;
    json_t *result = js_create(js, req, kind, name, stream, err);
    jsCtx_Destroy(js);
    return result;
}

static json_t *cmd_jetstream_delete(json_t *req, json_t **err)
{
    const char *kind, *name, *stream;
    jsCtx *js = NULL;
    if ((*err = js_args(req, &kind, &name, &stream, &js)))
        return NULL;
    natsStatus s;
    jsErrCode jerr = 0;
    if (strcmp(kind, "stream") == 0)
        s = js_DeleteStream(js, name, NULL, &jerr);
    else if (strcmp(kind, "consumer") == 0 || strcmp(kind, "durable") == 0)
        s = js_DeleteConsumer(js, stream, name, NULL, &jerr);
    else if (strcmp(kind, "kv") == 0)
        s = js_DeleteKeyValue(js, name);
    else {
        jsCtx_Destroy(js);
        *err = err_drv("unsupported", "libnats has no '%s' API", kind);
        return NULL;
    }
    jsCtx_Destroy(js);
    if (s != NATS_OK) {
        *err = err_js(s, jerr);
        return NULL;
    }
    return json_object();
}

static void finish(void)
{
    pthread_mutex_lock(&out_mu);
    out_closed = true;
    pthread_mutex_unlock(&out_mu);
    drop_connection();
}

static const struct {
    const char *name;
    handler_fn fn;
} COMMANDS[] = {
    {"hello", cmd_hello},
    {"connect", cmd_connect},
    {"publish", cmd_publish},
    {"subscribe", cmd_subscribe},
    {"unsubscribe", cmd_unsubscribe},
    {"request", cmd_request},
    {"flush", cmd_flush},
    {"close", cmd_close},
    {"decode_headers", cmd_decode_headers},
    {"encode_headers", cmd_encode_headers},
    {"headers_op", cmd_headers_op},
    {"validate_subject", cmd_validate_subject},
    {"validate_name", cmd_validate_name},
    {"jetstream_create", cmd_jetstream_create},
    {"jetstream_delete", cmd_jetstream_delete},
};

static void respond(json_t *id, json_t *result, json_t *err)
{
    json_t *r = (err == NULL)
                    ? json_pack("{s:O, s:b, s:o}", "id", id, "ok", 1, "result", result)
                    : json_pack("{s:O, s:b, s:o}", "id", id, "ok", 0, "error", err);
    emit(r, false);
}

/* Handles one line; returns false when the driver should exit. */
static bool handle_line(const char *line, size_t len)
{
    json_error_t jerr;
    json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    json_t *id = req ? json_object_get(req, "id") : NULL;
    if (req == NULL || !json_is_object(req) || !json_is_integer(id) ||
        json_integer_value(id) < 0) {
        json_t *null = json_null();
        respond(null, NULL,
                err_drv("invalid", "malformed request: %s",
                        req == NULL ? jerr.text : "not an object with a non-negative integer id"));
        json_decref(null);
        json_decref(req);
        return true;
    }
    json_t *cmd = json_object_get(req, "cmd");
    if (!json_is_string(cmd)) {
        respond(id, NULL, err_drv("invalid", "malformed request: 'cmd' must be a string"));
        json_decref(req);
        return true;
    }
    const char *name = json_string_value(cmd);
    bool keep_going = true;
    if (strcmp(name, "exit") == 0) {
        finish();
        respond(id, json_object(), NULL);
        keep_going = false;
    } else {
        handler_fn fn = NULL;
        for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
            if (strcmp(COMMANDS[i].name, name) == 0)
                fn = COMMANDS[i].fn;
        json_t *err = NULL, *result = NULL;
        if (fn == NULL)
            err = err_drv("unsupported", "unknown command '%s'", name);
        else
            result = fn(req, &err);
        respond(id, result, err);
    }
    json_decref(req);
    return keep_going;
}

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    bool running = true;
    /* natsConnection_Connect opens the library itself, but messages made
     * without a connection (publish arguments, header encode/decode) need
     * it open first. -1: the library's default lock spin count. */
    natsStatus s = nats_Open(-1);
    if (s != NATS_OK)
        fprintf(stderr, "driver: nats_Open failed: %s\n", natsStatus_GetText(s));
    while (running && (n = getline(&line, &cap, stdin)) >= 0) {
        size_t len = (size_t)n;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        running = handle_line(line, len);
    }
    free(line);
    if (running)
        finish();
    fflush(stdout);
    /* Skip libnats's atexit teardown, which may wait on its threads. */
    _exit(0);
}
