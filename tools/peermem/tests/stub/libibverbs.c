// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A stand-in for rdma-core's libibverbs.so.1 in the tests of `peermem doctor`
 * (tests/doctor_path.rs), built by them with cc. It lists the devices named in
 * PEERMEM_STUB_DEVICES ("mlx5_0=EBADF,mlx5_1=EOPNOTSUPP,mlx5_2=OK"), each answering the
 * dma-buf probe as named: OK registers (a region the caller must deregister), an errno
 * name or number fails with that errno. A probe with other arguments than NCCL's and
 * UCX's (offset, length, iova and access 0, fd -1) fails with EINVAL. At exit it writes
 * the count of each call to PEERMEM_STUB_LOG, so a test sees every open closed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dev {
	char name[64];
	int answer; /* 0: registers */
};

static struct dev devs[16];
static int ndevs;
static int calls_open, calls_close, calls_pd, calls_dealloc, calls_mr, calls_dereg, calls_list, calls_free;
static int mr_token;

static int errno_of(const char *s)
{
	if (!strcmp(s, "OK"))
		return 0;
	if (!strcmp(s, "EBADF"))
		return EBADF;
	if (!strcmp(s, "EOPNOTSUPP"))
		return EOPNOTSUPP;
	if (!strcmp(s, "EPROTONOSUPPORT"))
		return EPROTONOSUPPORT;
	return atoi(s);
}

void **ibv_get_device_list(int *num)
{
	const char *spec = getenv("PEERMEM_STUB_DEVICES");
	char buf[1024], *save = NULL, *tok;
	void **list;
	int i;

	calls_list++;
	ndevs = 0;
	if (spec) {
		snprintf(buf, sizeof(buf), "%s", spec);
		for (tok = strtok_r(buf, ",", &save); tok && ndevs < 16; tok = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(tok, '=');

			if (!eq)
				continue;
			*eq = '\0';
			snprintf(devs[ndevs].name, sizeof(devs[ndevs].name), "%s", tok);
			devs[ndevs].answer = errno_of(eq + 1);
			ndevs++;
		}
	}
	list = calloc(ndevs + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (i = 0; i < ndevs; i++)
		list[i] = &devs[i];
	if (num)
		*num = ndevs;
	return list;
}

void ibv_free_device_list(void **list)
{
	calls_free++;
	free(list);
}

const char *ibv_get_device_name(void *dev)
{
	return ((struct dev *)dev)->name;
}

void *ibv_open_device(void *dev)
{
	calls_open++;
	return dev;
}

int ibv_close_device(void *ctx)
{
	calls_close++;
	return 0;
}

void *ibv_alloc_pd(void *ctx)
{
	calls_pd++;
	return ctx;
}

int ibv_dealloc_pd(void *pd)
{
	calls_dealloc++;
	return 0;
}

void *ibv_reg_dmabuf_mr(void *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access)
{
	struct dev *d = pd;

	calls_mr++;
	if (offset || length || iova || fd != -1 || access) {
		errno = EINVAL;
		return NULL;
	}
	if (d->answer == 0)
		return &mr_token;
	errno = d->answer;
	return NULL;
}

int ibv_dereg_mr(void *mr)
{
	if (mr == &mr_token)
		calls_dereg++;
	return 0;
}

__attribute__((destructor)) static void stub_log(void)
{
	const char *path = getenv("PEERMEM_STUB_LOG");
	FILE *f;

	if (!path || !(f = fopen(path, "w")))
		return;
	fprintf(f, "list=%d free=%d open=%d close=%d pd=%d dealloc=%d mr=%d dereg=%d\n",
		calls_list, calls_free, calls_open, calls_close, calls_pd, calls_dealloc, calls_mr, calls_dereg);
	fclose(f);
}
