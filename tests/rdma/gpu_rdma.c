// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * gpu_rdma: the project's RDMA test program, for part rdma (docs/testing.md, "The
 * RDMA chain"; tests/qemu/plans/rdma.sh). A real RDMA application that registers
 * "GPU memory" through the kernel's own RDMA stack in the test VM: libibverbs +
 * librxe -> ib_uverbs -> rdma_rxe (soft-RoCE on a dummy netdev, looped to its own
 * GID) -> the peer-memory core -> peermem -> the fake nvidia.ko, whose node
 * (fake_nvidia_uapi.h) hands the memory out: open() is the CUDA context, mmap() is
 * cuMemAlloc (GPU VA == CPU VA), FAKE_NV_IOC_FREE is cudaFree.
 *
 * The plan runs one subcommand at a time, each a scenario:
 *   reg [--size N] [--expect ok|fail] [--host] [--name NAME]   one registration
 *   transfer [--sizes a,b,c]          WRITE, READ, SEND, atomics; every byte checked
 *   revoke --mode callback|persistent cudaFree while the MR is live
 *   fork                              a child cannot register the parent's GPU range
 *   hold [--mrs N] [--seconds S]      N live GPU MRs, "ready", transfers until S s
 *                                     pass (0: forever), SIGTERM or SIGINT
 *   isolate                           two processes cannot reach each other's memory
 * Common options: -d/--dev DEV (rxe0), --gpu-node PATH (FAKE_NV_GPU_NODE), -v,
 * --timeout S (a completion's limit: S, default 20, plus 1 s per MiB), --watchdog S
 * (the whole run's, default 600; hold: S + 600).
 *
 * Output on stdout: one line per check, "ok - NAME", "ok - NAME (detail)" or
 * "not ok - NAME: why" (NAME has no colon and no " ("); hold also prints "ready".
 * Diagnostics (-v) go to stderr as "# ..." lines. Exit status 0 when every check
 * passed, 1 otherwise, 2 for a usage error. Run as root: transfer pins 2 x 64 MiB of
 * host staging memory.
 *
 * Build: gcc -O2 -Wall -Wextra -Werror -std=gnu11 -I tests/fakes/include \
 *		-o gpu_rdma tests/rdma/gpu_rdma.c -libverbs
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "fake_nvidia_uapi.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define PORT		1
#define KiB		((size_t)1024)
#define MiB		(1024 * KiB)
#define GPU_PAGE	((size_t)FAKE_NV_GPU_PAGE)
#define ACCESS_GPU	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
/*
 * transfer fills the GPU buffer with a background once, and after each test restores
 * what that test wrote (bg_fill: the window touched since the last restore; all of
 * the buffer after a test that found a byte changed outside its target). Each test
 * checks its whole target and GUARD bytes either side of it; the last check of the
 * subcommand is that the whole buffer is the background again, so a byte written
 * anywhere else by any test is found too. (Checking all 64 MiB after every test took
 * most of the part's time in a VM without KVM.)
 */
#define GUARD		MiB
#define TAIL		64		/* bytes after a host destination: must stay 0 */
#define XFER		(64 * KiB)	/* one transfer of fork, hold, revoke, isolate */
#define MAX_SIZES	32
#define SUB_OFF		((size_t)12345)	/* transfer's second MR: a sub-range */
#define SUB_LEN		MiB
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

enum { MODE_NONE, MODE_CALLBACK, MODE_PERSISTENT };

static struct {
	const char *dev, *gpu_node, *name, *cmd;
	int verbose, expect_fail, host, mode, mrs, seconds, timeout_s, watchdog_s, nsizes;
	size_t size, sizes[MAX_SIZES];
} opt = {
	.dev = "rxe0", .gpu_node = FAKE_NV_GPU_NODE, .size = MiB, .mrs = 4,
	.seconds = 10, .timeout_s = 20, .watchdog_s = -1,
};

static int out_fd = 1;		/* check lines: stdout, or an isolate worker's pipe */
static int failures;
static char why[1024];		/* the reason of the last failure */
static char alarm_msg[160];
static volatile sig_atomic_t stop;

/* ---- output ---- */

static void __attribute__((format(printf, 1, 2))) diag(const char *fmt, ...)
{
	va_list ap;

	if (!opt.verbose)
		return;
	va_start(ap, fmt);
	fputs("# ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Sets why (its arguments may include why itself); returns -1. */
static int __attribute__((format(printf, 1, 2))) fail(const char *fmt, ...)
{
	char t[sizeof(why)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t, sizeof(t), fmt, ap);
	va_end(ap);
	memcpy(why, t, sizeof(why));
	return -1;
}

static void out(const char *s, size_t n)
{
	while (n) {
		ssize_t k = write(out_fd, s, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		s += k;
		n -= (size_t)k;
	}
}

/* One check line, written at once (isolate's workers write to a pipe). */
static void report(bool ok, const char *name, const char *fmt, va_list ap)
{
	char line[1600], detail[1400] = "";
	int n, i;

	if (fmt)
		vsnprintf(detail, sizeof(detail), fmt, ap);
	n = snprintf(line, sizeof(line) - 1, "%s - %s%s%.1400s%s", ok ? "ok" : "not ok", name,
		     !fmt ? "" : ok ? " (" : ": ", detail, fmt && ok ? ")" : "");
	n = n < 0 ? 0 : n > (int)sizeof(line) - 2 ? (int)sizeof(line) - 2 : n;
	for (i = 0; i < n; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	line[n++] = '\n';
	out(line, (size_t)n);
	failures += !ok;
}

static void __attribute__((format(printf, 3, 4))) check(bool ok, const char *name,
							 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report(ok, name, fmt, ap);
	va_end(ap);
}
#define pass(...)	check(true, __VA_ARGS__)
#define flunk(...)	check(false, __VA_ARGS__)

/* ok when rc is 0, else not ok with why. */
static void verdict(int rc, const char *name)
{
	if (rc)
		flunk(name, "%s", why);
	else
		pass(name, NULL);
}

/* A check's name, in one of a few rotating buffers. */
static const char * __attribute__((format(printf, 1, 2))) nm(const char *fmt, ...)
{
	static char buf[6][200];
	static int k;
	char *b = buf[k++ % 6];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b, sizeof(buf[0]), fmt, ap);
	va_end(ap);
	return b;
}

static void on_alarm(int sig)
{
	(void)sig;
	out(alarm_msg, strlen(alarm_msg));
	_exit(1);
}

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- byte patterns ---- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* A test's pseudo-random pattern: n bytes from seed. */
static void pat_fill(uint8_t *p, size_t n, uint64_t seed)
{
	size_t i;

	for (i = 0; i < n; i += 8) {
		uint64_t v = mix64(seed * 0x100000001b3ULL + i);

		memcpy(p + i, &v, n - i < 8 ? n - i : 8);
	}
}

/* The GPU buffer's background: the 8 bytes at offset 8w are bg_word(w). */
static uint64_t bg_word(size_t w)
{
	return mix64((uint64_t)w ^ 0x6a09e667f3bcc909ULL);
}

static uint8_t bg_byte(size_t i)
{
	uint64_t v = bg_word(i / 8);
	uint8_t b[8];

	memcpy(b, &v, 8);
	return b[i % 8];
}

struct gpu {
	int fd;
	uint8_t *va;	/* the GPU VA, which is the CPU VA */
	size_t len;
};

/* The window of the GPU buffer written since the last bg_fill (empty: lo >= hi). */
static size_t dirty_lo, dirty_hi;

/* [from, to) of the GPU buffer may have been written. */
static void touch(const struct gpu *g, size_t from, size_t to)
{
	if (to > g->len)
		to = g->len;
	if (from < dirty_lo)
		dirty_lo = from;
	if (to > dirty_hi)
		dirty_hi = to;
}

/* The background again where the buffer was written since the last call. */
static void bg_fill(const struct gpu *g)
{
	size_t w;

	for (w = dirty_lo / 8; w < (dirty_hi + 7) / 8 && w < g->len / 8; w++) {
		uint64_t v = bg_word(w);

		memcpy(g->va + 8 * w, &v, 8);
	}
	dirty_lo = SIZE_MAX;
	dirty_hi = 0;
}

/* The first byte in [from, to) that is not the background, or -1. */
static ssize_t bg_diff(const struct gpu *g, size_t from, size_t to)
{
	size_t i = from;

	for (; i < to && (i % 8 || to - i < 8); i++)
		if (g->va[i] != bg_byte(i))
			return (ssize_t)i;
	for (; i + 8 <= to; i += 8) {
		uint64_t v;

		memcpy(&v, g->va + i, 8);
		if (v != bg_word(i / 8))
			break;
	}
	for (; i < to; i++)
		if (g->va[i] != bg_byte(i))
			return (ssize_t)i;
	return -1;
}

static ssize_t first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
	size_t i;

	if (!memcmp(a, b, n))
		return -1;
	for (i = 0; a[i] == b[i]; i++)
		;
	return (ssize_t)i;
}

/* Every byte within GUARD of the target [off, off + len) still the background. */
static int verify_around(const struct gpu *g, size_t off, size_t len)
{
	size_t lo = off > GUARD ? off - GUARD : 0;
	size_t hi = off + len + GUARD < g->len ? off + len + GUARD : g->len;
	ssize_t d;

	d = bg_diff(g, lo, off);
	if (d < 0)
		d = bg_diff(g, off + len, hi);
	if (d >= 0) {
		touch(g, 0, g->len);	/* the next test starts from a clean buffer */
		return fail("GPU byte +%zd outside the target [+%zu, +%zu) changed: 0x%02x, background 0x%02x",
			    d, off, off + len, g->va[d], bg_byte((size_t)d));
	}
	return 0;
}

/* The target holds want, and nothing around it changed. */
static int verify_gpu(const struct gpu *g, size_t off, size_t len, const uint8_t *want)
{
	ssize_t d = first_diff(g->va + off, want, len);

	if (d >= 0)
		return fail("GPU byte +%zu (byte %zd of the target) is 0x%02x, want 0x%02x",
			    off + (size_t)d, d, g->va[off + (size_t)d], want[d]);
	return verify_around(g, off, len);
}

/* A host destination holds want, and the TAIL bytes after it are still zero. */
static int verify_host(const uint8_t *dst, const uint8_t *want, size_t len)
{
	ssize_t d = first_diff(dst, want, len);
	size_t i;

	if (d >= 0)
		return fail("host byte %zd is 0x%02x, want 0x%02x", d, dst[d], want[d]);
	for (i = len; i < len + TAIL; i++)
		if (dst[i])
			return fail("host byte %zu past the transfer was written (0x%02x)", i, dst[i]);
	return 0;
}

/* ---- the GPU node ---- */

static int gpu_open(struct gpu *g)
{
	g->va = NULL;
	g->fd = open(opt.gpu_node, O_RDWR | O_CLOEXEC);
	if (g->fd < 0)
		return fail("open %s: %s (is the fake nvidia.ko loaded?)", opt.gpu_node,
			    strerror(errno));
	return 0;
}

/* cuMemAlloc: a mapping of the node, its address the GPU VA. */
static int gpu_alloc(struct gpu *g, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd, 0);

	if (p == MAP_FAILED)
		return fail("mmap of %zu B on %s (cuMemAlloc): %s", len, opt.gpu_node,
			    strerror(errno));
	g->va = p;
	g->len = len;
	diag("GPU allocation of %zu B at %p", len, p);
	if ((uintptr_t)p % GPU_PAGE)
		return fail("the GPU VA %p is not 64 KiB aligned", p);
	return 0;
}

static int gpu_unmap(struct gpu *g)
{
	int ret = g->va && munmap(g->va, g->len) ? fail("munmap: %s", strerror(errno)) : 0;

	g->va = NULL;
	return ret;
}

/* FAKE_NV_IOC_INFO: 0, or an errno value. */
static int gpu_info(int fd, const void *va, struct fake_nv_gpu_info *info)
{
	memset(info, 0, sizeof(*info));
	info->va = (uintptr_t)va;
	return ioctl(fd, FAKE_NV_IOC_INFO, info) ? errno : 0;
}

/* After a deregistration: INFO once the pins are gone (2 s at most), or its errno. */
static int gpu_info_unpinned(int fd, const void *va, struct fake_nv_gpu_info *info)
{
	struct timespec nap = { 0, 100000000 };
	int e, i;

	for (i = 0; (e = gpu_info(fd, va, info)) == 0 && info->pins && i < 20; i++)
		nanosleep(&nap, NULL);
	return e;
}

static const char *info_str(int fd, const void *va)
{
	static char b[160];
	struct fake_nv_gpu_info i;
	int e = gpu_info(fd, va, &i);

	if (e)
		snprintf(b, sizeof(b), "driver info %s", strerror(e));
	else
		snprintf(b, sizeof(b), "driver info allocation 0x%llx %llu B, pins %u%s",
			 (unsigned long long)i.alloc_va, (unsigned long long)i.alloc_size, i.pins,
			 i.flags & FAKE_NV_GPU_FREED ? ", freed" : "");
	return b;
}

/* The mappings of this process that overlap [va, va + len): how many, or -1. */
static int maps_overlap(uint64_t va, uint64_t len, char *line, int sz)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char buf[512];
	int found = 0;

	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f)) {
		unsigned long long s, e;

		if (sscanf(buf, "%llx-%llx", &s, &e) != 2 || s >= va + len || e <= va)
			continue;
		if (!found++)
			snprintf(line, (size_t)sz, "%.*s", sz - 1, buf);
	}
	fclose(f);
	if (found)
		line[strcspn(line, "\n")] = 0;
	return found;
}

/* ---- verbs ---- */

struct rdma {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];	/* qp[0] initiates, qp[1] answers: connected to each other */
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	union ibv_gid gid;
	int gid_index;
	uint32_t psn;
	bool auto_renew;	/* a new QP pair after an error completion (transfer) */
	uint64_t wr_id;
	int nstash;
	struct ibv_wc stash[16];	/* completions not waited for yet */
};

/* The GID index whose GID is IPv4-mapped (::ffff:a.b.c.d) and of RoCE v2 type. */
static int find_gid(struct rdma *r)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	int i;

	/* (rdma-core reads the type from sysfs where the kernel lacks the query.) */
	for (i = 0; i < r->port.gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (!ibv_query_gid_ex(r->ctx, PORT, (uint32_t)i, &e, 0) &&
		    !memcmp(e.gid.raw, v4, 12) && e.gid_type == IBV_GID_TYPE_ROCE_V2) {
			r->gid = e.gid;
			r->gid_index = i;
			return 0;
		}
	}
	return fail("%s port %d has no IPv4-mapped RoCE v2 GID among %d (has its netdev an IPv4 address?)",
		    opt.dev, PORT, r->port.gid_tbl_len);
}

static const char *gid_str(const struct rdma *r)
{
	static char b[96];
	const uint8_t *a = r->gid.raw + 12;

	snprintf(b, sizeof(b), "%s port %d GID index %d IPv4 %u.%u.%u.%u RoCE v2 MTU %d", opt.dev,
		 PORT, r->gid_index, a[0], a[1], a[2], a[3], 128 << r->port.active_mtu);
	return b;
}

/* The device and a PD only (reg, and fork's child). */
static int rdma_open_pd(struct rdma *r)
{
	struct ibv_device **list;
	int n = 0, i, e;

	memset(r, 0, sizeof(*r));
	list = ibv_get_device_list(&n);
	if (!list)
		return fail("ibv_get_device_list: %s (is ib_uverbs loaded?)", strerror(errno));
	for (i = 0; i < n && strcmp(ibv_get_device_name(list[i]), opt.dev); i++)
		;
	if (i == n) {
		ibv_free_device_list(list);
		return fail("no RDMA device %s among %d (rdma link add? librxe?)", opt.dev, n);
	}
	r->ctx = ibv_open_device(list[i]);
	e = errno;
	ibv_free_device_list(list);
	if (!r->ctx)
		return fail("ibv_open_device(%s): %s", opt.dev, strerror(e));
	r->pd = ibv_alloc_pd(r->ctx);
	return r->pd ? 0 : fail("ibv_alloc_pd: %s", strerror(errno));
}

/* Move qp[i] to INIT (step 0), RTR (1) or RTS (2), towards qp[!i]. */
static int qp_step(struct rdma *r, int i, int step)
{
	static const char *const names[3] = { "INIT", "RTR", "RTS" };
	static const int masks[3] = {
		IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
		IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
		IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
	};
	uint32_t psn[2] = { r->psn & 0xffffff, (r->psn + 0x1000) & 0xffffff };
	int atom = r->dev.max_qp_rd_atom > 16 ? 16 : r->dev.max_qp_rd_atom < 1 ? 1 :
		   r->dev.max_qp_rd_atom;
	struct ibv_qp_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	if (step == 0) {
		a.qp_state = IBV_QPS_INIT;
		a.port_num = PORT;
		a.qp_access_flags = ACCESS_GPU;
	} else if (step == 1) {
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = r->port.active_mtu;
		a.dest_qp_num = r->qp[!i]->qp_num;
		a.rq_psn = psn[!i];
		a.max_dest_rd_atomic = (uint8_t)atom;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = PORT;
		a.ah_attr.grh.dgid = r->gid;	/* its own GID: loopback */
		a.ah_attr.grh.sgid_index = (uint8_t)r->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	} else {
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = psn[i];
		a.max_rd_atomic = (uint8_t)atom;
	}
	rc = ibv_modify_qp(r->qp[i], &a, masks[step]);
	return rc ? fail("QP %u to %s: %s", r->qp[i]->qp_num, names[step], strerror(rc)) : 0;
}

/* Two RC QPs connected to each other through the device's own GID (loopback). */
static int qp_pair(struct rdma *r)
{
	struct ibv_qp_init_attr ia;
	int i, step;

	for (i = 0; i < 2; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = r->cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 64;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		r->qp[i] = ibv_create_qp(r->pd, &ia);
		if (!r->qp[i])
			return fail("ibv_create_qp(RC): %s", strerror(errno));
	}
	for (step = 0; step < 3; step++)
		for (i = 0; i < 2; i++)
			if (qp_step(r, i, step))
				return -1;
	diag("QPs %u and %u connected, %s", r->qp[0]->qp_num, r->qp[1]->qp_num, gid_str(r));
	return 0;
}

static int qp_destroy(struct rdma *r)
{
	int i, rc, ret = 0;

	for (i = 1; i >= 0; i--) {
		rc = r->qp[i] ? ibv_destroy_qp(r->qp[i]) : 0;
		if (rc)
			ret = fail("ibv_destroy_qp: %s", strerror(rc));
		r->qp[i] = NULL;
	}
	return ret;
}

/* After an error completion (transfer): a fresh pair, new PSNs, the CQ drained. */
static void qp_renew(struct rdma *r)
{
	char saved[sizeof(why)];
	struct ibv_wc wc[8];

	memcpy(saved, why, sizeof(why));
	qp_destroy(r);
	while (ibv_poll_cq(r->cq, 8, wc) > 0)
		;
	r->nstash = 0;
	r->psn += 0x10000;
	if (qp_pair(r))
		fprintf(stderr, "# renewing the QP pair failed: %s\n", why);
	memcpy(why, saved, sizeof(why));
}

static int rdma_open(struct rdma *r)
{
	int rc;

	if (rdma_open_pd(r))
		return -1;
	rc = ibv_query_device(r->ctx, &r->dev);
	if (!rc)
		rc = ibv_query_port(r->ctx, PORT, &r->port);
	if (rc)
		return fail("ibv_query_device/port: %s", strerror(rc));
	if (r->port.state != IBV_PORT_ACTIVE)
		return fail("%s port %d is %s, not active (is its netdev up?)", opt.dev, PORT,
			    ibv_port_state_str(r->port.state));
	if (find_gid(r))
		return -1;
	r->cq = ibv_create_cq(r->ctx, 256, NULL, NULL, 0);
	if (!r->cq)
		return fail("ibv_create_cq: %s", strerror(errno));
	r->psn = 0x123;
	return qp_pair(r);
}

static int rdma_close(struct rdma *r)
{
	int rc, ret = qp_destroy(r);

	rc = r->cq ? ibv_destroy_cq(r->cq) : 0;
	if (rc)
		ret = fail("ibv_destroy_cq: %s", strerror(rc));
	rc = r->pd ? ibv_dealloc_pd(r->pd) : 0;
	if (rc)
		ret = fail("ibv_dealloc_pd: %s", strerror(rc));
	if (r->ctx && ibv_close_device(r->ctx))
		ret = fail("ibv_close_device: %s", strerror(errno));
	r->cq = NULL;
	r->pd = NULL;
	r->ctx = NULL;
	return ret;
}

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *p, size_t len, const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, p, len, ACCESS_GPU);
	int e = errno;

	if (!mr)
		fail("ibv_reg_mr(%s, %p, %zu B): errno %d: %s%s", what, p, len, e, strerror(e),
		     e == ENOMEM || e == EPERM ? " (RLIMIT_MEMLOCK? run as root)" : "");
	return mr;
}

static int dereg(struct ibv_mr **mr, const char *what)
{
	int rc = *mr ? ibv_dereg_mr(*mr) : 0;

	*mr = NULL;
	return rc ? fail("ibv_dereg_mr(%s): %s", what, strerror(rc)) : 0;
}

/* Host staging buffers of len + TAIL bytes, registered ordinarily. */
struct host {
	uint8_t *src, *dst;
	struct ibv_mr *smr, *dmr;
};

static int host_alloc(struct rdma *r, struct host *h, size_t len)
{
	void *s = NULL, *d = NULL;

	if (posix_memalign(&s, 4096, len + TAIL) || posix_memalign(&d, 4096, len + TAIL)) {
		free(s);
		return fail("no memory for 2 x %zu B of host buffers", len);
	}
	h->src = memset(s, 0, len + TAIL);
	h->dst = memset(d, 0, len + TAIL);
	h->smr = reg_mr(r->pd, h->src, len + TAIL, "host source");
	h->dmr = h->smr ? reg_mr(r->pd, h->dst, len + TAIL, "host destination") : NULL;
	return h->dmr ? 0 : -1;
}

static int host_free(struct host *h)
{
	int ret = dereg(&h->smr, "host source") | dereg(&h->dmr, "host destination");

	free(h->src);
	free(h->dst);
	h->src = h->dst = NULL;
	return ret;
}

static const char *op_str(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_WRITE ? "RDMA WRITE" : op == IBV_WR_RDMA_READ ? "RDMA READ" :
	       op == IBV_WR_SEND ? "SEND" : op == IBV_WR_ATOMIC_FETCH_AND_ADD ? "FETCH-AND-ADD" :
	       "COMPARE-AND-SWAP";
}

/* The completion of wr_id, within the limit (--timeout, plus 1 s per MiB). */
static int wait_wc(struct rdma *r, uint64_t wr_id, struct ibv_wc *res, size_t len,
		   const char *what)
{
	uint64_t limit = (uint64_t)opt.timeout_s * 1000 + (len / MiB) * 1000;
	uint64_t deadline = now_ms() + limit;
	struct timespec nap = { 0, 20000 };
	struct ibv_wc wc[8];
	bool found = false;
	int i, n;

	for (i = 0; i < r->nstash; i++) {
		if (r->stash[i].wr_id == wr_id) {
			*res = r->stash[i];
			r->stash[i] = r->stash[--r->nstash];
			return 0;
		}
	}
	while (!found) {
		n = ibv_poll_cq(r->cq, 8, wc);
		if (n < 0)
			return fail("ibv_poll_cq failed (%d) waiting for the %s", n, what);
		for (i = 0; i < n; i++) {
			if (wc[i].wr_id == wr_id && !found) {
				*res = wc[i];
				found = true;
			} else if (r->nstash < (int)ARRAY_SIZE(r->stash)) {
				r->stash[r->nstash++] = wc[i];
			}
		}
		if (!n && now_ms() > deadline)
			return fail("no completion for the %s of %zu B within %" PRIu64 " s", what,
				    len, limit / 1000);
		if (!n)
			nanosleep(&nap, NULL);
	}
	return 0;
}

/*
 * One signalled work request on qp[0], one SGE; waits for its completion and gives its
 * status in *st. -1 (why set) when it could not be posted or did not complete.
 */
static int rdma_op(struct rdma *r, enum ibv_wr_opcode op, void *laddr, size_t len, uint32_t lkey,
		   uint64_t raddr, uint32_t rkey, uint64_t cmp_add, uint64_t swap,
		   enum ibv_wc_status *st)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = (uint32_t)len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;
	int rc;

	if (len > r->port.max_msg_sz)
		return fail("%zu B exceeds the port's max_msg_sz %u", len, r->port.max_msg_sz);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = ++r->wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	rc = ibv_post_send(r->qp[0], &wr, &bad);
	if (rc)
		return fail("ibv_post_send(%s): %s", op_str(op), strerror(rc));
	rc = wait_wc(r, wr.wr_id, &wc, len, op_str(op));
	if (!rc) {
		*st = wc.status;
		if (wc.status != IBV_WC_SUCCESS)
			diag("%s of %zu B at 0x%" PRIx64 ": %s (vendor error 0x%x)", op_str(op),
			     len, raddr, ibv_wc_status_str(wc.status), wc.vendor_err);
	}
	if ((rc || wc.status != IBV_WC_SUCCESS) && r->auto_renew)
		qp_renew(r);
	return rc;
}

/* 0 when rc is 0 and the status is want; else why says what happened. */
static int want_status(int rc, enum ibv_wc_status st, enum ibv_wc_status want)
{
	if (!rc && st != want)
		return fail("completed with status %s (%d), want %s", ibv_wc_status_str(st), st,
			    ibv_wc_status_str(want));
	return rc;
}

/* rdma_op that must succeed. */
static int rdma_ok(struct rdma *r, enum ibv_wr_opcode op, void *laddr, size_t len, uint32_t lkey,
		   uint64_t raddr, uint32_t rkey)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	int rc = rdma_op(r, op, laddr, len, lkey, raddr, rkey, 0, 0, &st);

	return want_status(rc, st, IBV_WC_SUCCESS) ? fail("the %s: %s", op_str(op), why) : 0;
}

/* ---- the setup every subcommand shares ---- */

struct env {
	struct rdma r;
	struct gpu g;
	struct host h;
	struct ibv_mr *mr;	/* the GPU allocation's */
};

/* Device, PD, CQ, QP pair; GPU context; a GPU allocation of gpu_len (if any) and its MR. */
static int env_open(struct env *e, size_t gpu_len, size_t host_len)
{
	memset(e, 0, sizeof(*e));
	e->g.fd = -1;
	if (rdma_open(&e->r) || gpu_open(&e->g) || host_alloc(&e->r, &e->h, host_len) ||
	    (gpu_len && gpu_alloc(&e->g, gpu_len)))
		return -1;
	if (gpu_len && !(e->mr = reg_mr(e->r.pd, e->g.va, gpu_len, "GPU allocation")))
		return -1;
	return 0;
}

/* Deregister, destroy, unmap, close: the check NAME, ok if all of it (and ret) went well. */
static void env_close(struct env *e, int ret, const char *name)
{
	ret |= dereg(&e->mr, "GPU allocation");
	ret |= host_free(&e->h);
	ret |= rdma_close(&e->r);
	ret |= gpu_unmap(&e->g);
	if (e->g.fd >= 0 && close(e->g.fd))
		ret = fail("close of the GPU node: %s", strerror(errno));
	verdict(ret, name);
}

/*
 * WRITE len bytes of a pattern from the host into the GPU at g->va + off, check them
 * through the mapping, READ them back into the zeroed host buffer and compare.
 */
static int xfer(struct rdma *r, struct host *h, const struct gpu *g, struct ibv_mr *mr,
		size_t off, size_t len, uint64_t seed)
{
	uint8_t *p = g->va + off;
	ssize_t d;

	pat_fill(h->src, len, seed);
	if (rdma_ok(r, IBV_WR_RDMA_WRITE, h->src, len, h->smr->lkey, (uintptr_t)p, mr->rkey))
		return -1;
	d = first_diff(p, h->src, len);
	if (d >= 0)
		return fail("after the WRITE, GPU byte +%zu is 0x%02x, want 0x%02x",
			    off + (size_t)d, p[d], h->src[d]);
	memset(h->dst, 0, len + TAIL);
	if (rdma_ok(r, IBV_WR_RDMA_READ, h->dst, len, h->dmr->lkey, (uintptr_t)p, mr->rkey))
		return -1;
	return verify_host(h->dst, p, len);
}

/* ---- reg ---- */

static int cmd_reg(void)
{
	/* The checks' prefix, distinct per variant: the plan runs several in one suite. */
	const char *pre = opt.name ? opt.name : nm("reg %s memory%s", opt.host ? "host" : "GPU",
						   opt.expect_fail ? " refusal" : "");
	const char *name = opt.name ? opt.name : nm("reg %s memory %zu B%s",
						    opt.host ? "host" : "GPU", opt.size,
						    opt.expect_fail ? " is refused" : "");
	struct fake_nv_gpu_info info;
	struct gpu g = { .fd = -1 };
	struct ibv_mr *mr = NULL;
	struct rdma r;
	void *buf = NULL;
	int e, ret;

	if (rdma_open_pd(&r) || (opt.host ? posix_memalign(&buf, 4096, opt.size) &&
				 fail("no memory for %zu B", opt.size) :
				 gpu_open(&g) || gpu_alloc(&g, opt.size))) {
		flunk(name, "setup: %s", why);
		goto out;
	}
	if (!opt.host)
		buf = g.va;
	memset(buf, 0x5a, opt.size);
	mr = ibv_reg_mr(r.pd, buf, opt.size, ACCESS_GPU);
	e = errno;
	if (opt.expect_fail && mr)
		flunk(name, "registered (lkey 0x%x, rkey 0x%x) where a refusal was expected",
		      mr->lkey, mr->rkey);
	else if (opt.expect_fail)
		pass(name, "errno %d: %s", e, strerror(e));
	else if (mr)
		pass(name, "lkey 0x%x rkey 0x%x at %p", mr->lkey, mr->rkey, buf);
	else
		flunk(name, "ibv_reg_mr of %p: errno %d: %s", buf, e, strerror(e));
	if (!opt.host) {
		e = gpu_info(g.fd, g.va, &info);
		if (mr && (e || !info.pins))
			flunk(nm("%s pins the allocation", pre), "%s", info_str(g.fd, g.va));
		else if (mr)
			pass(nm("%s pins the allocation", pre), "pins %u", info.pins);
		else if (e || info.pins)
			flunk(nm("%s leaves no pin", pre), "%s", info_str(g.fd, g.va));
		else
			pass(nm("%s leaves no pin", pre), NULL);
	}
	if (mr) {
		verdict(dereg(&mr, "the registration"), nm("%s deregistration", pre));
		e = opt.host ? 0 : gpu_info_unpinned(g.fd, g.va, &info);
		if (!opt.host && (e || info.pins))
			flunk(nm("%s deregistration unpins the allocation", pre), "%s",
			      info_str(g.fd, g.va));
		else if (!opt.host)
			pass(nm("%s deregistration unpins the allocation", pre), NULL);
	}
out:
	if (opt.host)
		free(buf);
	ret = gpu_unmap(&g);
	if (g.fd >= 0 && close(g.fd))
		ret = fail("close of the GPU node: %s", strerror(errno));
	ret |= rdma_close(&r);
	verdict(ret, nm("%s teardown", pre));
	return 0;
}

/* ---- transfer ---- */

static struct env T;
static struct ibv_mr *T_sub;	/* the second MR: SUB_LEN bytes at +SUB_OFF */

static void t_write_read(struct ibv_mr *mr, size_t off, size_t size, const char *via)
{
	struct gpu *g = &T.g;
	struct host *h = &T.h;
	uint64_t raddr = (uintptr_t)(g->va + off);

	bg_fill(g);
	touch(g, off, off + size);
	pat_fill(h->src, size, ((uint64_t)size << 24) ^ off ^ (uint64_t)(mr == T_sub) << 63);
	verdict(rdma_ok(&T.r, IBV_WR_RDMA_WRITE, h->src, size, h->smr->lkey, raddr, mr->rkey) ||
		verify_gpu(g, off, size, h->src), nm("write %zu B%s at +%zu", size, via, off));
	/* The READ must bring back what the GPU holds (the pattern, if the WRITE passed). */
	memset(h->dst, 0, size + TAIL);
	verdict(rdma_ok(&T.r, IBV_WR_RDMA_READ, h->dst, size, h->dmr->lkey, raddr, mr->rkey) ||
		verify_host(h->dst, g->va + off, size), nm("read %zu B%s at +%zu", size, via, off));
}

/* The GPU as the local side: the source of a WRITE, the destination of a READ. */
static void t_gpu_local(size_t off, size_t size)
{
	struct gpu *g = &T.g;
	struct host *h = &T.h;

	bg_fill(g);
	touch(g, off, off + size);
	pat_fill(g->va + off, size, 0x77);
	memset(h->dst, 0, size + TAIL);
	verdict(rdma_ok(&T.r, IBV_WR_RDMA_WRITE, g->va + off, size, T.mr->lkey,
			(uintptr_t)h->dst, h->dmr->rkey) || verify_host(h->dst, g->va + off, size),
		nm("write from GPU memory %zu B at +%zu", size, off));
	bg_fill(g);
	touch(g, off, off + size);
	pat_fill(h->src, size, 0x78);
	verdict(rdma_ok(&T.r, IBV_WR_RDMA_READ, g->va + off, size, T.mr->lkey,
			(uintptr_t)h->src, h->smr->rkey) || verify_gpu(g, off, size, h->src),
		nm("read into GPU memory %zu B at +%zu", size, off));
}

/* A SEND from the host into a receive posted on GPU memory (larger than the message). */
static int t_send(size_t off, size_t m)
{
	struct rdma *r = &T.r;
	struct gpu *g = &T.g;
	size_t rlen = off + m + 100 <= g->len ? m + 100 : g->len - off;
	struct ibv_sge rs = { .addr = (uintptr_t)(g->va + off), .length = (uint32_t)rlen,
			      .lkey = T.mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = ++r->wr_id, .sg_list = &rs, .num_sge = 1 }, *bad;
	struct ibv_wc wc;
	int rc;

	bg_fill(g);
	touch(g, off, off + rlen);
	pat_fill(T.h.src, m, m ^ off ^ 0x5e);
	rc = ibv_post_recv(r->qp[1], &rw, &bad);
	if (rc)
		return fail("ibv_post_recv: %s", strerror(rc));
	if (rdma_ok(r, IBV_WR_SEND, T.h.src, m, T.h.smr->lkey, 0, 0) ||
	    wait_wc(r, rw.wr_id, &wc, m, "receive"))
		return -1;
	if (wc.status != IBV_WC_SUCCESS)
		return fail("the receive completed with status %s (%d)",
			    ibv_wc_status_str(wc.status), wc.status);
	if (wc.opcode != IBV_WC_RECV || wc.byte_len != m)
		return fail("the receive completed with opcode %d, %u B; want a RECV of %zu B",
			    wc.opcode, wc.byte_len, m);
	return verify_gpu(g, off, m, T.h.src);
}

static int atomic_step(enum ibv_wr_opcode op, size_t off, uint64_t cmp_add, uint64_t swap,
		       uint64_t old, uint64_t want_old, uint64_t want_new)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	uint64_t got, now;
	int rc;

	memcpy(T.g.va + off, &old, 8);
	memset(T.h.dst, 0xa5, 8);
	rc = rdma_op(&T.r, op, T.h.dst, 8, T.h.dmr->lkey, (uintptr_t)(T.g.va + off),
		     T.mr->rkey, cmp_add, swap, &st);
	if (want_status(rc, st, IBV_WC_SUCCESS))
		return -1;
	memcpy(&got, T.h.dst, 8);
	memcpy(&now, T.g.va + off, 8);
	if (got != want_old)
		return fail("returned 0x%016" PRIx64 ", want the original 0x%016" PRIx64, got,
			    want_old);
	if (now != want_new)
		return fail("the GPU holds 0x%016" PRIx64 ", want 0x%016" PRIx64, now, want_new);
	return verify_around(&T.g, off, 8);
}

static void t_atomics(size_t off)
{
	uint64_t v = 0x0123456789abcdefULL + off, add = 0x1111111111ULL;
	uint64_t sw = 0xfeedfacecafef00dULL;
	int none = T.r.dev.atomic_cap == IBV_ATOMIC_NONE ?
		   fail("%s reports no atomics (atomic_cap NONE)", opt.dev) : 0;

	bg_fill(&T.g);
	touch(&T.g, off, off + 8);
	verdict(none || atomic_step(IBV_WR_ATOMIC_FETCH_AND_ADD, off, add, 0, v, v, v + add),
		nm("fetch-and-add at +%zu", off));
	verdict(none || atomic_step(IBV_WR_ATOMIC_CMP_AND_SWP, off, v + add, sw, v + add,
				    v + add, sw), nm("compare-and-swap at +%zu", off));
	verdict(none || atomic_step(IBV_WR_ATOMIC_CMP_AND_SWP, off, v, 0, sw, sw, sw),
		nm("compare-and-swap mismatch at +%zu", off));
}

/* An access outside the sub-range MR: refused, nothing moved (the pair is renewed). */
static void t_refused(const char *name, enum ibv_wr_opcode op, size_t off, size_t size)
{
	struct host *h = &T.h;
	bool w = op == IBV_WR_RDMA_WRITE;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	int rc;

	bg_fill(&T.g);
	pat_fill(h->src, size, 0xbad);
	memset(h->dst, 0, size + TAIL);
	rc = rdma_op(&T.r, op, w ? h->src : h->dst, size, w ? h->smr->lkey : h->dmr->lkey,
		     (uintptr_t)(T.g.va + off), T_sub->rkey, 0, 0, &st);
	if (want_status(rc, st, IBV_WC_REM_ACCESS_ERR))
		flunk(name, "%s", why);
	else if (verify_around(&T.g, off, 0))
		flunk(name, "refused, but %s", why);
	else if (h->dst[0] || memcmp(h->dst, h->dst + 1, size + TAIL - 1))	/* all zero */
		flunk(name, "refused, but the host destination was written");
	else
		pass(name, "%s", ibv_wc_status_str(st));
}

static int cmd_transfer(void)
{
	static const size_t def[] = { 1, 7, 4096, 65535, 65536, 65537, MiB + 3, 2 * MiB, 64 * MiB };
	static const size_t offs[] = { 0, 1, 4095, 65536 - 3 };
	const size_t *sizes = opt.nsizes ? opt.sizes : def;
	size_t n = opt.nsizes ? (size_t)opt.nsizes : ARRAY_SIZE(def), max = 2 * MiB, alloc, i, j;

	for (i = 0; i < n; i++)
		max = sizes[i] > max ? sizes[i] : max;
	/* 64 MiB + 128 KiB for the default sizes: room for every offset. */
	alloc = ((max + GPU_PAGE - 1) & ~(GPU_PAGE - 1)) + 128 * KiB;
	if (env_open(&T, alloc, max) ||
	    !(T_sub = reg_mr(T.r.pd, T.g.va + SUB_OFF, SUB_LEN, "GPU sub-range"))) {
		flunk("transfer setup", "%s", why);
		goto out;
	}
	T.r.auto_renew = true;
	touch(&T.g, 0, T.g.len);	/* the background everywhere, once */
	pass("transfer setup", "%s, GPU %zu B at %p, rkey 0x%x, sub-range rkey 0x%x",
	     gid_str(&T.r), alloc, (void *)T.g.va, T.mr->rkey, T_sub->rkey);
	/* Above 2 MiB only the first and the last offset (aligned, and across a GPU
	 * page): soft-RoCE moves each byte with the CPU, slowly in a VM without KVM. */
	for (i = 0; i < n; i++)
		for (j = 0; j < ARRAY_SIZE(offs); j++)
			if (offs[j] + sizes[i] <= alloc &&
			    (sizes[i] <= 2 * MiB || j == 0 || j == ARRAY_SIZE(offs) - 1))
				t_write_read(T.mr, offs[j], sizes[i], "");
	t_write_read(T_sub, SUB_OFF, 65537, " via the sub-range MR");
	t_write_read(T_sub, SUB_OFF + SUB_LEN - 65537, 65537, " via the sub-range MR");
	t_write_read(T_sub, SUB_OFF, SUB_LEN, " via the sub-range MR");
	t_gpu_local(4095, 65537);
	verdict(t_send(777, 4097), "send 4097 B into a receive at +777");
	verdict(t_send(65536 - 3, 200000), "send 200000 B into a receive at +65533");
	t_atomics(65536 + 8 * 37);	/* inside the second 64 KiB GPU page */
	t_atomics(alloc - 8);		/* the last 8 bytes */
	t_refused("write past the sub-range MR's end is refused", IBV_WR_RDMA_WRITE,
		  SUB_OFF + SUB_LEN - 4096, 4097);
	t_refused("write before the sub-range MR's start is refused", IBV_WR_RDMA_WRITE,
		  SUB_OFF - 1, 2);
	t_refused("read past the sub-range MR's end is refused", IBV_WR_RDMA_READ,
		  SUB_OFF + SUB_LEN - 1, 2);
	bg_fill(&T.g);
	{
		ssize_t d = bg_diff(&T.g, 0, T.g.len);

		verdict(d < 0 ? 0 : fail("GPU byte +%zd is 0x%02x, background 0x%02x", d,
					 T.g.va[d], bg_byte((size_t)d)),
			"nothing outside the targets changed in all of the GPU buffer");
	}
out:
	env_close(&T, dereg(&T_sub, "GPU sub-range"), "transfer teardown");
	return 0;
}

/* ---- revoke ---- */

static int cmd_revoke(void)
{
	const size_t len = 2 * MiB, off = 4096;
	bool cb = opt.mode == MODE_CALLBACK;
	const char *after = cb ? "revoke write after the free is refused" :
			    "revoke write after the free lands";
	struct fake_nv_gpu_info info;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	uint8_t *img = malloc(len);
	struct env e;
	uint64_t va;
	ssize_t d;
	int rc;

	if (env_open(&e, len, XFER) || (!img && fail("out of memory"))) {
		flunk("revoke setup", "%s", why);
		goto out;
	}
	pass("revoke setup", "%s, GPU %zu B at %p, rkey 0x%x, %s", gid_str(&e.r), len,
	     (void *)e.g.va, e.mr->rkey, info_str(e.g.fd, e.g.va));
	rc = xfer(&e.r, &e.h, &e.g, e.mr, off, XFER, 1);
	verdict(rc, "revoke write before the free lands");
	if (rc)
		goto out;
	/* A known pattern through the mapping, then cudaFree under the live MR. */
	pat_fill(img, len, 0xf7ee);
	memcpy(e.g.va, img, len);
	va = (uintptr_t)e.g.va;
	if (ioctl(e.g.fd, FAKE_NV_IOC_FREE, &va)) {
		flunk("revoke cudaFree while registered", "ioctl FAKE_NV_IOC_FREE: %s",
		      strerror(errno));
		goto out;
	}
	pass("revoke cudaFree while registered", "%s", info_str(e.g.fd, e.g.va));

	pat_fill(e.h.src, XFER, 2);
	rc = rdma_op(&e.r, IBV_WR_RDMA_WRITE, e.h.src, XFER, e.h.smr->lkey,
		     (uintptr_t)(e.g.va + off), e.mr->rkey, 0, 0, &st);
	if (!cb)
		memcpy(img + off, e.h.src, XFER);	/* the persistent pin: the bytes land */
	d = first_diff(e.g.va, img, len);
	if (want_status(rc, st, cb ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS))
		flunk(after, "%s", why);
	else if (cb)
		pass(after, "%s", ibv_wc_status_str(st));
	else if (d >= 0)
		flunk(after, "completed with %s, but byte +%zd is 0x%02x, want 0x%02x",
		      ibv_wc_status_str(st), d, e.g.va[d], img[d]);
	else
		pass(after, "the persistent pin keeps the freed memory alive: the WRITE completed with %s and its %zu B landed at +%zu",
		     ibv_wc_status_str(st), XFER, off);
	/* The freed memory is still CPU-mapped: no byte may have landed (callback). */
	if (cb && d >= 0)
		flunk("revoke freed memory unchanged", "byte +%zd is 0x%02x, was 0x%02x", d,
		      e.g.va[d], img[d]);
	else if (d >= 0)
		flunk("revoke freed memory unchanged around the write",
		      "byte +%zd is 0x%02x, want 0x%02x", d, e.g.va[d], img[d]);
	else
		pass(cb ? "revoke freed memory unchanged" : "revoke freed memory unchanged around the write",
		     NULL);
	verdict(dereg(&e.mr, "the freed allocation"), "revoke deregistration after the free");
	rc = gpu_info_unpinned(e.g.fd, e.g.va, &info);
	if (rc == ENOENT || (!rc && !info.pins))
		pass("revoke no pin left after deregistration", "%s", info_str(e.g.fd, e.g.va));
	else
		flunk("revoke no pin left after deregistration", "%s", info_str(e.g.fd, e.g.va));
out:
	free(img);
	env_close(&e, 0, "revoke teardown");
	return 0;
}

/* ---- fork and isolate: pipes ---- */

static int read_full(int fd, void *buf, size_t n, int timeout_ms)
{
	uint8_t *p = buf;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int rc = poll(&pf, 1, timeout_ms);
		ssize_t k = rc > 0 ? read(fd, p, n) : -1;

		if ((rc < 0 || k < 0) && errno == EINTR)
			continue;
		if (rc == 0)
			return fail("no message within %d s", timeout_ms / 1000);
		if (k < 0)
			return fail("poll/read: %s", strerror(errno));
		if (k == 0)
			return fail("the other side ended early");
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t n)
{
	ssize_t k;

	while ((k = write(fd, buf, n)) < 0 && errno == EINTR)
		;
	return k == (ssize_t)n ? 0 : fail("write to a pipe: %s", k < 0 ? strerror(errno) : "short");
}

/* Reap a child of ours: ok when it exited with 0. */
static void wait_child(pid_t pid, const char *name)
{
	int status = 0;

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			flunk(name, "waitpid(%d): %s", (int)pid, strerror(errno));
			return;
		}
	}
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		pass(name, NULL);
	else if (WIFEXITED(status))
		flunk(name, "exit status %d", WEXITSTATUS(status));
	else
		flunk(name, "killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* ---- fork ---- */

struct fork_msg {
	int32_t mapped;		/* mappings of the child's over the parent's GPU range */
	int32_t reg;		/* 1 registered, 0 refused, -1 not tried */
	int32_t reg_errno;
	uint32_t lkey;
	char maps[160];
	char err[300];
};

/* The child: none of the parent's verbs objects, a device and PD of its own. */
static int fork_child(void *va, size_t len, int wfd, int rfd)
{
	struct fork_msg m = { .reg = -1 };
	struct ibv_mr *mr;
	struct rdma cr;
	int code;
	char c;

	alarm((unsigned int)opt.watchdog_s);
	m.mapped = maps_overlap((uintptr_t)va, len, m.maps, sizeof(m.maps));
	if (rdma_open_pd(&cr)) {
		snprintf(m.err, sizeof(m.err), "%.299s", why);
	} else {
		errno = 0;
		mr = ibv_reg_mr(cr.pd, va, len, ACCESS_GPU);
		m.reg_errno = errno;
		m.reg = !!mr;
		m.lkey = mr ? mr->lkey : 0;
		if (mr)
			ibv_dereg_mr(mr);
	}
	code = m.mapped || m.reg ? 1 : 0;
	if (write_full(wfd, &m, sizeof(m)))
		code = 2;
	/* Alive until the parent is done with its transfers. */
	while (read(rfd, &c, 1) < 0 && errno == EINTR)
		;
	return rdma_close(&cr) ? 3 : code;
}

static int cmd_fork(void)
{
	const size_t len = 2 * MiB;
	const char *n_map = "fork child has no mapping of the parent's GPU memory";
	const char *n_reg = "fork child registering the parent's GPU range is refused";
	const char *n_during = "fork parent's MR works during the child's life";
	char err[sizeof(why)] = "", cerr[sizeof(why)] = "";
	int c2p[2] = { -1, -1 }, p2c[2] = { -1, -1 }, rounds = 0, after = 0;
	bool got = false, bad = false;
	struct fork_msg m;
	struct env e;
	uint64_t deadline;
	pid_t pid = -1;

	if (env_open(&e, len, XFER)) {
		flunk("fork setup", "%s", why);
		goto out;
	}
	pass("fork setup", "%s, GPU %zu B at %p", gid_str(&e.r), len, (void *)e.g.va);
	if (xfer(&e.r, &e.h, &e.g, e.mr, 4095, XFER, 10)) {
		flunk("fork parent's MR works before the fork", "%s", why);
		goto out;
	}
	pass("fork parent's MR works before the fork", NULL);
	if (pipe(c2p) || pipe(p2c) || (pid = fork()) < 0) {
		flunk(n_reg, "pipe/fork: %s", strerror(errno));
		goto out;
	}
	if (!pid) {
		close(c2p[0]);
		close(p2c[1]);
		_exit(fork_child(e.g.va, len, c2p[1], p2c[0]));
	}
	close(c2p[1]);
	close(p2c[0]);
	/* Transfers while the child lives: until it has tried, then three more. */
	deadline = now_ms() + 60000;
	while (!bad && !got) {
		struct pollfd pf = { .fd = c2p[0], .events = POLLIN };

		if (xfer(&e.r, &e.h, &e.g, e.mr, (size_t)(rounds % 16) * 4096 + 1, XFER,
			 100 + (uint64_t)rounds)) {
			snprintf(err, sizeof(err), "round %d: %.900s", rounds, why);
			bad = true;
		}
		rounds += !bad;
		if (poll(&pf, 1, 0) > 0 || now_ms() > deadline)
			break;
	}
	if (read_full(c2p[0], &m, sizeof(m), 30000))
		snprintf(cerr, sizeof(cerr), "the child's report: %.900s", why);
	else
		got = true;
	for (; got && !bad && after < 3; after++, rounds++) {
		if (xfer(&e.r, &e.h, &e.g, e.mr, (size_t)after * 8192 + 7, XFER,
			 200 + (uint64_t)after)) {
			snprintf(err, sizeof(err), "round %d: %.900s", rounds, why);
			bad = true;
		}
	}
	if (!got)
		flunk(n_map, "%s", cerr);
	else if (m.mapped)
		flunk(n_map, "%s%s", m.mapped < 0 ? "the child could not read its maps" :
		      "mapped in the child: ", m.mapped < 0 ? "" : m.maps);
	else
		pass(n_map, NULL);
	if (!got)
		flunk(n_reg, "%s", cerr);
	else if (m.reg < 0)
		flunk(n_reg, "the child's setup: %s", m.err);
	else if (m.reg)
		flunk(n_reg, "the child registered it (lkey 0x%x)", m.lkey);
	else
		pass(n_reg, "errno %d: %s", m.reg_errno, strerror(m.reg_errno));
	if (bad || !got)
		flunk(n_during, "%s", bad ? err : "the child never reported");
	else
		pass(n_during, "%d rounds, %d after the child's attempt", rounds, after);
	if (write(p2c[1], "x", 1) != 1)
		diag("could not tell the child to exit: %s", strerror(errno));
	wait_child(pid, "fork child exits cleanly");
	verdict(xfer(&e.r, &e.h, &e.g, e.mr, 65536 - 3, XFER, 999),
		"fork parent's MR works after the child's exit");
out:
	if (c2p[0] >= 0)
		close(c2p[0]);
	if (p2c[1] >= 0)
		close(p2c[1]);
	env_close(&e, 0, "fork teardown");
	return 0;
}

/* ---- hold ---- */

static int cmd_hold(void)
{
	const size_t len = 2 * MiB;
	const char *reg_name = nm("hold registers %d GPU MRs", opt.mrs);
	const char *run_name = nm("hold transfers across %d GPU MRs", opt.mrs);
	struct gpu *g = calloc((size_t)opt.mrs, sizeof(*g));
	struct ibv_mr **mr = calloc((size_t)opt.mrs, sizeof(*mr));
	struct sigaction sa = { .sa_handler = on_stop };
	uint64_t t0, rounds = 0;
	int i, made = 0, ret = 0;
	struct env e;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (env_open(&e, 0, XFER) || ((!g || !mr) && fail("out of memory"))) {
		flunk("hold setup", "%s", why);
		goto out;
	}
	pass("hold setup", "%s", gid_str(&e.r));
	for (made = 0; made < opt.mrs; made++) {
		g[made].fd = e.g.fd;
		if (gpu_alloc(&g[made], len) ||
		    !(mr[made] = reg_mr(e.r.pd, g[made].va, len, "GPU allocation"))) {
			flunk(reg_name, "MR %d: %s", made++, why);
			goto out;
		}
	}
	pass(reg_name, "%d x %zu B, %s", opt.mrs, len, info_str(e.g.fd, g[0].va));
	out("ready\n", 6);
	t0 = now_ms();
	while (!stop && (!opt.seconds || now_ms() - t0 < (uint64_t)opt.seconds * 1000)) {
		for (i = 0; i < opt.mrs && !stop; i++) {
			size_t off = (size_t)((rounds * 7 + (uint64_t)i) % 31) * 65536 + 4093;

			if (xfer(&e.r, &e.h, &g[i], mr[i], off, XFER, rounds * 64 + (uint64_t)i)) {
				flunk(run_name, "round %" PRIu64 ", MR %d: %s", rounds, i, why);
				goto out;
			}
		}
		rounds++;
	}
	pass(run_name, "%" PRIu64 " rounds in %.1f s%s", rounds, (double)(now_ms() - t0) / 1000,
	     stop ? ", stopped by a signal" : "");
out:
	for (i = 0; i < made; i++)
		ret |= dereg(&mr[i], "GPU allocation") | gpu_unmap(&g[i]);
	free(g);
	free(mr);
	env_close(&e, ret, "hold teardown");
	return 0;
}

/* ---- isolate ---- */

struct iso_msg {
	uint64_t va, len;
	uint32_t rkey, kind;	/* 1: this is my GPU memory, 2: I am done */
};

/* A worker: everything of its own, opened after the fork. */
static int worker(int w, int wfd, int rfd)
{
	const size_t len = MiB, off = 4095;
	const char *n_setup = nm("isolate worker %d setup", w);
	struct iso_msg mine = { .len = len, .kind = 1 }, other = { 0 };
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	struct ibv_mr *omr;
	uint8_t *img = malloc(len);
	void *resv = NULL;
	char line[200] = "";
	struct env e;
	ssize_t d;
	int k, err;

	alarm((unsigned int)opt.watchdog_s);
	memset(&e, 0, sizeof(e));
	e.g.fd = -1;
	if (!img && fail("out of memory"))
		goto setup_failed;
	if (w == 1) {
		/* Worker 0's range taken first here, so that this GPU memory lands elsewhere. */
		if (read_full(rfd, &other, sizeof(other), 60000))
			goto setup_failed;
		resv = mmap((void *)(uintptr_t)other.va, other.len, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (resv != MAP_FAILED && resv != (void *)(uintptr_t)other.va)
			munmap(resv, other.len);
		if (resv != (void *)(uintptr_t)other.va)
			resv = NULL;
	}
	k = env_open(&e, len, XFER);
	if (resv)
		munmap(resv, other.len);
	if (k)
		goto setup_failed;
	pat_fill(img, len, 0x15011a7e0ULL + (uint64_t)w);
	memcpy(e.g.va, img, len);
	mine.va = (uintptr_t)e.g.va;
	mine.rkey = e.mr->rkey;
	if (write_full(wfd, &mine, sizeof(mine)) ||
	    (w == 0 && read_full(rfd, &other, sizeof(other), 60000)))
		goto setup_failed;
	pass(n_setup, "pid %d, GPU %zu B at %p rkey 0x%x; the other's at 0x%" PRIx64 " rkey 0x%x",
	     (int)getpid(), len, (void *)e.g.va, e.mr->rkey, other.va, other.rkey);

	/* Data through its own memory: the bytes at off zeroed, written back, read. */
	memset(e.g.va + off, 0, XFER);
	memcpy(e.h.src, img + off, XFER);
	memset(e.h.dst, 0, XFER + TAIL);
	verdict(rdma_ok(&e.r, IBV_WR_RDMA_WRITE, e.h.src, XFER, e.h.smr->lkey,
			(uintptr_t)(e.g.va + off), e.mr->rkey) ||
		((d = first_diff(e.g.va, img, len)) >= 0 &&
		 fail("GPU byte +%zd is 0x%02x after the WRITE, want 0x%02x", d, e.g.va[d], img[d])) ||
		rdma_ok(&e.r, IBV_WR_RDMA_READ, e.h.dst, XFER, e.h.dmr->lkey,
			(uintptr_t)(e.g.va + off), e.mr->rkey) ||
		verify_host(e.h.dst, img + off, XFER),
		nm("isolate worker %d moves data through its own memory", w));

	/* The other's range: never this process's GPU memory, so refused. */
	k = maps_overlap(other.va, other.len, line, sizeof(line));
	errno = 0;
	omr = other.va < mine.va + len && mine.va < other.va + other.len ? NULL :
	      ibv_reg_mr(e.r.pd, (void *)(uintptr_t)other.va, other.len, ACCESS_GPU);
	err = errno;
	if (other.va < mine.va + len && mine.va < other.va + other.len)
		flunk(nm("isolate worker %d cannot register the other's GPU range", w),
		      "setup: the two GPU ranges overlap");
	else if (omr)
		flunk(nm("isolate worker %d cannot register the other's GPU range", w),
		      "registered (lkey 0x%x)%s%s", omr->lkey, k > 0 ? "; mapped here " : "",
		      k > 0 ? line : "");
	else
		pass(nm("isolate worker %d cannot register the other's GPU range", w),
		     "errno %d: %s; %s%s", err, strerror(err),
		     k > 0 ? "mapped here " : k ? "maps unreadable" : "not mapped here",
		     k > 0 ? line : "");
	if (omr)
		ibv_dereg_mr(omr);

	/* The other's rkey through its own looped pair: another PD's key. */
	memset(e.h.src, 0xee, 4096);
	k = rdma_op(&e.r, IBV_WR_RDMA_WRITE, e.h.src, 4096, e.h.smr->lkey, other.va + 4096,
		    other.rkey, 0, 0, &st);
	if (want_status(k, st, IBV_WC_REM_ACCESS_ERR))
		flunk(nm("isolate worker %d cannot write with the other's rkey", w), "%s", why);
	else
		pass(nm("isolate worker %d cannot write with the other's rkey", w), "%s",
		     ibv_wc_status_str(st));

	/* Both done: its own memory holds only its own bytes. */
	mine.kind = 2;
	if (write_full(wfd, &mine, sizeof(mine)) || read_full(rfd, &other, sizeof(other), 60000))
		flunk(nm("isolate worker %d memory holds only its own bytes", w),
		      "waiting for the other worker: %s", why);
	else if ((d = first_diff(e.g.va, img, len)) >= 0)
		flunk(nm("isolate worker %d memory holds only its own bytes", w),
		      "byte +%zd is 0x%02x, want 0x%02x", d, e.g.va[d], img[d]);
	else
		pass(nm("isolate worker %d memory holds only its own bytes", w), NULL);
	goto out;
setup_failed:
	flunk(n_setup, "%s", why);
out:
	free(img);
	env_close(&e, 0, nm("isolate worker %d teardown", w));
	return failures ? 1 : 0;
}

static int cmd_isolate(void)
{
	int x01[2], x10[2], res[2][2], w;
	pid_t pid[2];

	if (pipe(x01) || pipe(x10) || pipe(res[0]) || pipe(res[1])) {
		flunk("isolate setup", "pipe: %s", strerror(errno));
		return 0;
	}
	for (w = 0; w < 2; w++) {
		pid[w] = fork();
		if (pid[w] < 0) {
			flunk("isolate setup", "fork: %s", strerror(errno));
			if (w)
				kill(pid[0], SIGKILL);
			return 0;
		}
		if (!pid[w]) {
			close(w ? x10[0] : x01[0]);
			close(w ? x01[1] : x10[1]);
			close(res[0][0]);
			close(res[1][0]);
			close(res[!w][1]);
			out_fd = res[w][1];
			_exit(worker(w, w ? x10[1] : x01[1], w ? x01[0] : x10[0]));
		}
	}
	close(x01[0]);
	close(x01[1]);
	close(x10[0]);
	close(x10[1]);
	/* Each worker's lines, in order (a few lines each: a pipe never fills). */
	for (w = 0; w < 2; w++) {
		static char buf[16384];
		size_t len = 0;
		ssize_t k;
		char *p;

		close(res[w][1]);
		while (len < sizeof(buf) - 1 &&
		       ((k = read(res[w][0], buf + len, sizeof(buf) - 1 - len)) > 0 ||
			(k < 0 && errno == EINTR)))
			len += k > 0 ? (size_t)k : 0;
		buf[len] = 0;
		out(buf, len);
		for (p = buf; (p = strstr(p, "not ok - ")); p++)
			failures++;
		close(res[w][0]);
		wait_child(pid[w], nm("isolate worker %d exits cleanly", w));
	}
	return 0;
}

/* ---- main ---- */

/* A size: a number, maybe with K, M or G, maybe "+N" (1M+3). */
static int parse_size(const char *s, size_t *res)
{
	unsigned long long v, add = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	if (*end && strchr("kKmMgG", *end))
		v <<= strchr("kK", *end) ? 10 : strchr("mM", *end) ? 20 : 30, end++;
	if (*end == '+')
		add = strtoull(end + 1, &end, 0);
	if (*end || !v || v + add > UINT32_MAX)
		return -1;
	*res = (size_t)(v + add);
	return 0;
}

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: gpu_rdma [-d DEV] [--gpu-node PATH] [-v] [--timeout S] [--watchdog S] CMD\n"
		"  reg [--size N] [--expect ok|fail] [--host] [--name NAME]\n"
		"  transfer [--sizes a,b,c]      (sizes like 4096, 64K, 1M+3)\n"
		"  revoke --mode callback|persistent\n"
		"  fork\n"
		"  hold [--mrs N] [--seconds S]  (S 0: until SIGTERM or SIGINT)\n"
		"  isolate\n");
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dev", required_argument, NULL, 'd' }, { "gpu-node", required_argument, NULL, 'G' },
		{ "verbose", no_argument, NULL, 'v' }, { "size", required_argument, NULL, 's' },
		{ "expect", required_argument, NULL, 'e' }, { "host", no_argument, NULL, 'H' },
		{ "name", required_argument, NULL, 'n' }, { "sizes", required_argument, NULL, 'S' },
		{ "mode", required_argument, NULL, 'm' }, { "mrs", required_argument, NULL, 'M' },
		{ "seconds", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, 't' },
		{ "watchdog", required_argument, NULL, 'w' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct { const char *name; int (*fn)(void); } cmds[] = {
		{ "reg", cmd_reg }, { "transfer", cmd_transfer }, { "revoke", cmd_revoke },
		{ "fork", cmd_fork }, { "hold", cmd_hold }, { "isolate", cmd_isolate },
	};
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	struct sigaction sa = { .sa_handler = on_alarm };
	char *tok, *save = NULL;
	size_t i;
	int c;

	while ((c = getopt_long(argc, argv, "d:vh", lo, NULL)) != -1) {
		switch (c) {
		case 'd': opt.dev = optarg; break;
		case 'G': opt.gpu_node = optarg; break;
		case 'v': opt.verbose = 1; break;
		case 'H': opt.host = 1; break;
		case 'n': opt.name = optarg; break;
		case 's':
			if (parse_size(optarg, &opt.size))
				return usage(stderr, 2);
			break;
		case 'e':
			if (strcmp(optarg, "ok") && strcmp(optarg, "fail"))
				return usage(stderr, 2);
			opt.expect_fail = !strcmp(optarg, "fail");
			break;
		case 'S':
			for (tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				if (opt.nsizes == MAX_SIZES ||
				    parse_size(tok, &opt.sizes[opt.nsizes++]))
					return usage(stderr, 2);
			break;
		case 'm':
			opt.mode = !strcmp(optarg, "callback") ? MODE_CALLBACK :
				   !strcmp(optarg, "persistent") ? MODE_PERSISTENT : -1;
			if (opt.mode < 0)
				return usage(stderr, 2);
			break;
		case 'M': opt.mrs = atoi(optarg); break;
		case 'T': opt.seconds = atoi(optarg); break;
		case 't': opt.timeout_s = atoi(optarg); break;
		case 'w': opt.watchdog_s = atoi(optarg); break;
		case 'h': return usage(stdout, 0);
		default: return usage(stderr, 2);
		}
	}
	if (optind != argc - 1 || opt.mrs < 1 || opt.seconds < 0 || opt.timeout_s < 1)
		return usage(stderr, 2);
	opt.cmd = argv[optind];
	for (i = 0; i < ARRAY_SIZE(cmds) && strcmp(cmds[i].name, opt.cmd); i++)
		;
	if (i == ARRAY_SIZE(cmds) || (!strcmp(opt.cmd, "revoke") && opt.mode == MODE_NONE))
		return usage(stderr, 2);
	if (opt.watchdog_s < 0)
		opt.watchdog_s = strcmp(opt.cmd, "hold") ? 600 : opt.seconds ? opt.seconds + 600 : 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	signal(SIGPIPE, SIG_IGN);
	/* The staging buffers are pinned (as root no memlock limit applies anyway). */
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		diag("setrlimit(RLIMIT_MEMLOCK): %s", strerror(errno));
	snprintf(alarm_msg, sizeof(alarm_msg), "not ok - %s watchdog: no result within %d s\n",
		 opt.cmd, opt.watchdog_s);
	sigaction(SIGALRM, &sa, NULL);
	alarm((unsigned int)opt.watchdog_s);
	cmds[i].fn();
	return failures ? 1 : 0;
}
