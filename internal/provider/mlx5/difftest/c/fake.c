// fake.c: a user-space stand-in for the uverbs kernel driver of one mlx5
// device, loaded with LD_PRELOAD under an unmodified libibverbs + libmlx5
// (rdma-core 44). It answers the legacy write() ABI (RDMA_VERBS_IOCTL is
// refused with ENOTTY, so libibverbs falls back to write() for every command),
// maps UAR pages as anonymous memory, and records a trace: each command's
// driver data (addresses written as page-relative symbols), and on request
// every queue byte that changed (fk_dump). The Go fake kernel
// (internal/provider/mlx5/difftest) answers the same device description the
// same way; see ../README.md.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <ftw.h>
#include <endian.h>
#include <linux/netlink.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl.h>
#include <rdma/mlx5-abi.h>

#include "fake.h"

#define PAGE 4096
#define MAXOBJ 64

static int (*real_open)(const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_ioctl)(int, unsigned long, ...);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_close)(int);
static int (*real_socket)(int, int, int);

static int devfd = -1;

struct dev dev; // the device description
static char sysdir[256];
// FAKE_QUIET: no command trace on stdout, which is then the program's own
// (ibv_devinfo's, which the devinfo check compares).
static int quiet;

// Regions whose bytes the trace shows.
struct region {
	char name[32];
	uint8_t *addr;
	size_t len;
	uint8_t *shadow; // the bytes at the last dump
	int uar;         // a UAR page: cleared after each dump
	int live;
};
static struct region regions[4 * MAXOBJ];
static int nregions;

struct cq {
	int live;
	int chan_wfd;         // the write end of its completion channel, or -1
	uint64_t user_handle; // what an event carries
	uint32_t cqn, nent, cqe_size;
	uint8_t *buf;
	uint32_t pi; // the fake producer index (for inject)
	int region;
};
static struct cq cqs[MAXOBJ];
static int ncq;

struct qp {
	int live;
	uint32_t qpn, uidx;
};
static struct qp qps[MAXOBJ];
static int nqp;
static uint32_t nhandle = 1, npd, nmr, nsrq;

// Handles the fake gave out to CQs and QPs, and the names of their regions.
static char handle_names[1024][16];

static uint32_t new_handle(const char *kind, int n)
{
	uint32_t h = nhandle++;
	if (h < 1024)
		snprintf(handle_names[h], sizeof(handle_names[h]), "%s%d", kind, n);
	return h;
}

// Page symbols: every page an address of driver data points into gets a
// number in order of first appearance, so that traces of two processes
// compare.
static uintptr_t pages[256];
static int npages;

static void sym(char *out, size_t n, uint64_t a)
{
	uintptr_t p = a & ~(uintptr_t)(PAGE - 1);
	int i;
	if (a == 0) {
		snprintf(out, n, "0");
		return;
	}
	for (i = 0; i < npages; i++)
		if (pages[i] == p)
			break;
	if (i == npages && npages < 256)
		pages[npages++] = p;
	snprintf(out, n, "P%d+0x%llx", i, (unsigned long long)(a - p));
}

static void hex(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

// trace_cmd prints one command: its name, its driver data in and out, with
// the 8-byte address fields at the offsets in addrs (-1 ends the list)
// zeroed in the hex and named after it.
static void trace_cmd(const char *name, const void *in, size_t inlen, const void *out, size_t outlen,
		      const int *addrs, const char *extra)
{
	uint8_t buf[512];
	char s[64];
	if (quiet)
		return;
	size_t n = inlen < sizeof(buf) ? inlen : sizeof(buf);
	memcpy(buf, in, n);
	printf("cmd %s", name);
	if (extra && *extra)
		printf(" %s", extra);
	for (int i = 0; addrs && addrs[i] >= 0; i++) {
		uint64_t a;
		if ((size_t)addrs[i] + 8 > n)
			continue;
		memcpy(&a, buf + addrs[i], 8);
		memset(buf + addrs[i], 0, 8);
		sym(s, sizeof(s), a);
		printf(" @%d=%s", addrs[i], s);
	}
	printf(" in=");
	hex(buf, n);
	printf(" out=");
	hex(out, outlen);
	printf("\n");
	fflush(stdout);
}

static int add_region(const char *name, void *addr, size_t len, int uar)
{
	if (nregions == (int)(sizeof(regions) / sizeof(regions[0])))
		return -1;
	struct region *r = &regions[nregions];
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->addr = addr;
	r->len = len;
	r->shadow = calloc(1, len);
	memcpy(r->shadow, addr, len);
	r->uar = uar;
	r->live = 1;
	return nregions++;
}

// drop_regions stops dumping an object's regions. The page of its queue
// buffer loses its symbol: the allocators of the two drivers reuse freed
// memory differently, so a later buffer there gets a new number, as one
// elsewhere would. (Doorbell record pages are shared and keep theirs.)
static void drop_regions(const char *prefix)
{
	size_t n = strlen(prefix);
	for (int i = 0; i < nregions; i++) {
		struct region *r = &regions[i];
		if (!r->live || strncmp(r->name, prefix, n) != 0 || r->name[n] != '.')
			continue;
		r->live = 0;
		if (strcmp(r->name + n, ".buf") == 0)
			for (int j = 0; j < npages; j++)
				if (pages[j] == ((uintptr_t)r->addr & ~(uintptr_t)(PAGE - 1)))
					pages[j] = 1; // retired: no page address is 1
	}
}

// fk_dump prints every 16-byte line of a live region that changed since the
// last dump; UAR pages are cleared after each dump, so each dump shows the
// stores made since the last one.
void fk_dump(const char *label)
{
	printf("dump %s\n", label);
	for (int i = 0; i < nregions; i++) {
		struct region *r = &regions[i];
		if (!r->live)
			continue;
		for (size_t off = 0; off < r->len; off += 16) {
			size_t n = r->len - off < 16 ? r->len - off : 16;
			if (memcmp(r->addr + off, r->shadow + off, n) == 0)
				continue;
			printf("  %s+0x%04zx ", r->name, off);
			hex(r->addr + off, n);
			printf("\n");
		}
		if (r->uar) {
			memset(r->addr, 0, r->len);
			memset(r->shadow, 0, r->len);
		} else {
			memcpy(r->shadow, r->addr, r->len);
		}
	}
	fflush(stdout);
}

static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }

// fk_inject writes one CQE (fake_cqe builds it from spec) into the next
// slot of the cq-th CQ created, with the owner bit of the device's pass.
int fk_inject(int cq, const char *spec)
{
	if (cq < 0 || cq >= ncq || !cqs[cq].live) {
		fprintf(stderr, "fake: inject: no CQ %d\n", cq);
		return -1;
	}
	struct cq *c = &cqs[cq];
	uint8_t cqe[64];
	uint32_t qpn = 0;
	int has_uidx;
	if (fake_cqe(spec, cqe, &qpn, &has_uidx) < 0)
		return -1;
	for (int i = 0; i < nqp && !has_uidx; i++)
		if (qps[i].live && qps[i].qpn == qpn)
			put32(cqe + 32, (be32toh(*(uint32_t *)(cqe + 32)) & 0xff000000) | qps[i].uidx);
	uint32_t idx = c->pi & (c->nent - 1);
	uint8_t *slot = c->buf + (size_t)idx * c->cqe_size + (c->cqe_size - 64);
	uint8_t owner = (c->pi / c->nent) & 1;
	memcpy(slot, cqe, 63);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	slot[63] = (cqe[63] & 0xfe) | owner;
	c->pi++;
	return 0;
}

// fk_cq_ring returns the ring of the cq-th CQ created and its number of
// entries (the benchmark, bench.c, writes CQEs into it itself), or NULL.
uint8_t *fk_cq_ring(int cq, uint32_t *nent)
{
	if (cq < 0 || cq >= ncq || !cqs[cq].live || cqs[cq].cqe_size != 64)
		return NULL;
	*nent = cqs[cq].nent;
	return cqs[cq].buf;
}

// Completion channels: pipes; the fake keeps each write end.
static int chan_rfd[MAXOBJ], chan_wfd[MAXOBJ], nchan;

// fk_event writes a completion event of the cq-th CQ created to its
// channel, as the kernel does when an armed CQ gets a completion.
int fk_event(int cq)
{
	if (cq < 0 || cq >= ncq || !cqs[cq].live || cqs[cq].chan_wfd < 0) {
		fprintf(stderr, "fake: event: no CQ %d with a channel\n", cq);
		return -1;
	}
	uint64_t h = cqs[cq].user_handle;
	return real_write(cqs[cq].chan_wfd, &h, sizeof(h)) == sizeof(h) ? 0 : -1;
}

// ---- sysfs ----

static void wfile(const char *rel, const char *fmt, ...)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", sysdir, rel);
	// mkdir -p of the file's directory (no shell: a child would load this
	// library again)
	for (char *s = path + strlen(sysdir) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			abort();
		*s = '/';
	}
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static void make_sysfs(void)
{
	char rel[256];
	snprintf(sysdir, sizeof(sysdir), "/tmp/mlx5fake.XXXXXX");
	if (!mkdtemp(sysdir))
		abort();
	wfile("class/infiniband_verbs/abi_version", "6\n");
	wfile("class/infiniband_verbs/uverbs0/ibdev", "%s\n", dev.name);
	wfile("class/infiniband_verbs/uverbs0/dev", "1:3\n");
	wfile("class/infiniband_verbs/uverbs0/abi_version", "1\n");
	snprintf(rel, sizeof(rel), "class/infiniband/%s/node_type", dev.name);
	wfile(rel, "1: CA\n");
	snprintf(rel, sizeof(rel), "class/infiniband/%s/node_guid", dev.name);
	wfile(rel, "%04x:%04x:%04x:%04x\n", (unsigned)(dev.node_guid >> 48) & 0xffff,
	      (unsigned)(dev.node_guid >> 32) & 0xffff, (unsigned)(dev.node_guid >> 16) & 0xffff,
	      (unsigned)dev.node_guid & 0xffff);
	snprintf(rel, sizeof(rel), "class/infiniband/%s/sys_image_guid", dev.name);
	wfile(rel, "%04x:%04x:%04x:%04x\n", (unsigned)(dev.sys_image_guid >> 48) & 0xffff,
	      (unsigned)(dev.sys_image_guid >> 32) & 0xffff, (unsigned)(dev.sys_image_guid >> 16) & 0xffff,
	      (unsigned)dev.sys_image_guid & 0xffff);
	if (dev.board_id[0]) {
		snprintf(rel, sizeof(rel), "class/infiniband/%s/board_id", dev.name);
		wfile(rel, "%s\n", dev.board_id);
	}
	snprintf(rel, sizeof(rel), "class/infiniband/%s/device/modalias", dev.name);
	wfile(rel, "%s\n", dev.modalias);
	// The PCI driver, as sysfs links it (dangling here): goverbs' sysfs
	// discovery learns the driver from its name.
	char link[512];
	snprintf(link, sizeof(link), "%s/class/infiniband/%s/device/driver", sysdir, dev.name);
	if (symlink("../../../../bus/pci/drivers/mlx5_core", link) < 0)
		abort();
	// All of the table: libibverbs stops at the first missing file.
	for (int i = 0; i < MAX_GIDS; i++) {
		snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/1/gids/%d", dev.name, i);
		wfile(rel, "%s\n", dev.gids[i][0] ? dev.gids[i] : "0000:0000:0000:0000:0000:0000:0000:0000");
	}
	setenv("SYSFS_PATH", sysdir, 1);
	setenv("MLX5_LOCAL_CPUS", "1", 1);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static pid_t owner;

static void cleanup_sysfs(void)
{
	if (sysdir[0] && getpid() == owner)
		nftw(sysdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

__attribute__((constructor)) static void init(void)
{
	real_open = dlsym(RTLD_NEXT, "open");
	real_write = dlsym(RTLD_NEXT, "write");
	real_ioctl = dlsym(RTLD_NEXT, "ioctl");
	real_mmap = dlsym(RTLD_NEXT, "mmap");
	real_close = dlsym(RTLD_NEXT, "close");
	real_socket = dlsym(RTLD_NEXT, "socket");
	const char *desc = getenv("FAKE_DEVICE");
	if (!desc || load_device(desc, &dev) < 0) {
		fprintf(stderr, "fake: FAKE_DEVICE: cannot load device description\n");
		exit(2);
	}
	quiet = getenv("FAKE_QUIET") != NULL;
	// A child (a shell) inherits LD_PRELOAD but is no driver: stay out.
	if (getenv("SYSFS_PATH") && strstr(getenv("SYSFS_PATH"), "/mlx5fake."))
		return;
	owner = getpid();
	make_sysfs();
	atexit(cleanup_sysfs);
}

// ---- port 1 as a RoCE port ----

static int roce;         // "open roce": QUERY_PORT says Ethernet, CREATE_AH answers a MAC
static int gid_fallback; // a GID type was read from sysfs as v1 (see openat)

// fk_roce makes port 1 a RoCE port before the device is opened: its GID
// table and GID types in sysfs (where libibverbs reads them when the
// kernel refuses ioctls), QUERY_PORT's link layer and CREATE_AH's MAC.
int fk_roce(void)
{
	char rel[256];
	roce = 1;
	for (unsigned i = 0; i < 128; i++) {
		uint8_t g[16];
		int v2 = fake_roce_gid(&dev, i, g);
		snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/1/gids/%u", dev.name, i);
		wfile(rel, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x\n", g[0], g[1], g[2],
		      g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
		snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/1/gid_attrs/types/%u", dev.name, i);
		wfile(rel, "%s\n", v2 == 1 ? "RoCE v2" : "IB/RoCE v1");
	}
	return 0;
}

// openat: libibverbs reads a GID's type from sysfs (ibv_query_gid_type,
// as libmlx5's create_ah asks) where a kernel that takes ioctls answers
// QUERY_GID_ENTRY; the trace shows it as that command. For a v1 type
// libibverbs then asks QUERY_PORT for the link layer, which the ioctl
// carries: that QUERY_PORT is left out of the trace.
int openat(int dirfd, const char *path, int flags, ...)
{
	static int (*real_openat)(int, const char *, int, ...);
	if (!real_openat)
		real_openat = dlsym(RTLD_NEXT, "openat");
	va_list ap;
	va_start(ap, flags);
	mode_t mode = va_arg(ap, int);
	va_end(ap);
	const char *t = strstr(path, "gid_attrs/types/");
	const char *p = strstr(path, "ports/");
	if (roce && t && p) {
		unsigned port = atoi(p + 6), index = atoi(t + 16);
		uint8_t g[16];
		gid_fallback = fake_roce_gid(&dev, index, g) != 1;
		printf("cmd QUERY_GID_ENTRY port=%u index=%u in= out=\n", port, index);
		fflush(stdout);
	}
	return real_openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

// ---- interposed libc calls ----

int socket(int domain, int type, int protocol)
{
	if (domain == AF_NETLINK && protocol == NETLINK_RDMA) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return real_socket(domain, type, protocol);
}

static int fake_open(const char *path, int flags, mode_t mode)
{
	if (strcmp(path, "/dev/infiniband/uverbs0") == 0) {
		int fd = real_open("/dev/null", O_RDWR | (flags & O_CLOEXEC));
		if (fd >= 0)
			devfd = fd;
		return fd;
	}
	return real_open(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = va_arg(ap, int);
	va_end(ap);
	return fake_open(path, flags, mode);
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int stat(const char *path, struct stat *st)
{
	static int (*real_stat)(const char *, struct stat *);
	if (!real_stat)
		real_stat = dlsym(RTLD_NEXT, "stat");
	if (strcmp(path, "/dev/infiniband/uverbs0") == 0)
		path = "/dev/null";
	return real_stat(path, st);
}

int close(int fd)
{
	if (fd == devfd && fd >= 0)
		devfd = -1;
	return real_close(fd);
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (fd >= 0 && fd == devfd) {
		errno = ENOTTY;
		return -1;
	}
	return real_ioctl(fd, req, arg);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fd >= 0 && fd == devfd) {
		uint64_t pg = (uint64_t)off / PAGE;
		uint64_t cmd = pg >> 8, idx = pg & 0xff;
		void *p = real_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return p;
		char name[32];
		snprintf(name, sizeof(name), "uar%llu.%llu", (unsigned long long)cmd, (unsigned long long)idx);
		add_region(name, p, len, 1);
		return p;
	}
	return real_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

// ---- commands ----

static int fail(int e)
{
	errno = e;
	return -1;
}

static void respond(uint64_t addr, const void *core, size_t corelen, const void *drv, size_t drvlen, size_t outlen)
{
	uint8_t *o = (uint8_t *)(uintptr_t)addr;
	size_t n = corelen < outlen ? corelen : outlen;
	memcpy(o, core, n);
	if (outlen > corelen) {
		size_t m = outlen - corelen;
		memset(o + corelen, 0, m);
		memcpy(o + corelen, drv, drvlen < m ? drvlen : m);
	}
}

// destroy drops the regions of the object whose handle the legacy destroy
// command in names (after its response field).
static void destroy(const uint8_t *in, int ex)
{
	uint32_t h;
	memcpy(&h, in + (ex ? 0 : 8), 4);
	if (h >= 1024 || !handle_names[h][0])
		return;
	drop_regions(handle_names[h]);
	int n = atoi(handle_names[h] + strcspn(handle_names[h], "0123456789"));
	if (handle_names[h][0] == 'c' && n < MAXOBJ)
		cqs[n].live = 0;
	if (handle_names[h][0] == 'q' && n < MAXOBJ)
		qps[n].live = 0;
	handle_names[h][0] = 0;
}

// create_ah answers CREATE_AH (attr: its struct ib_uverbs_ah_attr) as
// mlx5_ib_create_ah does: on a RoCE port a GRH is required, the source GID
// must exist, and the driver response (at least up to the MAC) carries the
// destination MAC the kernel resolved.
static int create_ah(const uint8_t *attr, const uint8_t *drv, size_t drvlen, uint64_t resp, size_t outlen)
{
	char extra[128] = "attr=";
	for (int i = 0; i < 32; i++)
		snprintf(extra + 5 + 2 * i, 3, "%02x", attr[i]);
	struct mlx5_ib_create_ah_resp r = {0};
	uint32_t core = nhandle++;
	if (roce) {
		uint8_t g[16];
		if (!attr[29]) // is_global
			return fail(EINVAL);
		if (fake_roce_gid(&dev, attr[20], g) < 0)
			return fail(ENODATA);
		if (outlen < 4 + offsetof(struct mlx5_ib_create_ah_resp, reserved))
			return fail(EINVAL);
		r.response_length = offsetof(struct mlx5_ib_create_ah_resp, reserved);
		fake_roce_dmac(&dev, attr, r.dmac);
	}
	respond(resp, &core, 4, &r, r.response_length, outlen);
	trace_cmd("CREATE_AH", drv, drvlen, &r, sizeof(r), NULL, extra);
	return 0;
}

static const char *cmd_name(uint32_t c, int ex)
{
	static char buf[32];
	switch (c) {
	case IB_USER_VERBS_CMD_GET_CONTEXT: return "GET_CONTEXT";
	case IB_USER_VERBS_CMD_QUERY_DEVICE: return ex ? "QUERY_DEVICE_EX" : "QUERY_DEVICE";
	case IB_USER_VERBS_CMD_QUERY_PORT: return "QUERY_PORT";
	case IB_USER_VERBS_CMD_ALLOC_PD: return "ALLOC_PD";
	case IB_USER_VERBS_CMD_DEALLOC_PD: return "DEALLOC_PD";
	case IB_USER_VERBS_CMD_REG_MR: return "REG_MR";
	case IB_USER_VERBS_CMD_DEREG_MR: return "DEREG_MR";
	case IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: return "CREATE_COMP_CHANNEL";
	case IB_USER_VERBS_CMD_CREATE_CQ: return "CREATE_CQ";
	case IB_USER_VERBS_CMD_RESIZE_CQ: return "RESIZE_CQ";
	case IB_USER_VERBS_CMD_DESTROY_CQ: return "DESTROY_CQ";
	case IB_USER_VERBS_CMD_CREATE_QP: return "CREATE_QP";
	case IB_USER_VERBS_CMD_MODIFY_QP: return "MODIFY_QP";
	case IB_USER_VERBS_CMD_DESTROY_QP: return "DESTROY_QP";
	case IB_USER_VERBS_CMD_CREATE_SRQ: return "CREATE_SRQ";
	case IB_USER_VERBS_CMD_DESTROY_SRQ: return "DESTROY_SRQ";
	case IB_USER_VERBS_CMD_CREATE_AH: return "CREATE_AH";
	case IB_USER_VERBS_CMD_DESTROY_AH: return "DESTROY_AH";
	}
	snprintf(buf, sizeof(buf), "%s%u", ex ? "EX" : "CMD", c);
	return buf;
}

// command handles one command: in/inlen is the core command (without any
// header), drv/drvlen its driver data; resp is the response address, outlen
// the room for the core response plus driver data.
static int command(uint32_t c, int ex, const uint8_t *in, size_t inlen, const uint8_t *drv, size_t drvlen,
		   uint64_t resp, size_t outlen)
{
	const char *name = cmd_name(c, ex);
	char extra[128] = "";
	int quiet = gid_fallback; // a QUERY_PORT of libibverbs' GID type fallback
	gid_fallback = 0;
	(void)inlen;
	switch (c) {
	case IB_USER_VERBS_CMD_GET_CONTEXT: {
		struct mlx5_ib_alloc_ucontext_req_v2 req = {0};
		memcpy(&req, drv, drvlen < sizeof(req) ? drvlen : sizeof(req));
		if (req.flags & MLX5_IB_ALLOC_UCTX_DEVX)
			return fail(EPERM); // no DevX: libmlx5 asks again without it
		struct ib_uverbs_get_context_resp core = {0};
		struct mlx5_ib_alloc_ucontext_resp r;
		int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (efd < 0)
			return -1;
		core.async_fd = efd;
		core.num_comp_vectors = dev.num_comp_vectors;
		fake_ucontext_resp(&dev, &r);
		respond(resp, &core, sizeof(core), &r, sizeof(r), outlen);
		trace_cmd(name, drv, drvlen, &r, sizeof(r), NULL, NULL);
		return 0;
	}
	case IB_USER_VERBS_CMD_QUERY_DEVICE: {
		struct ib_uverbs_ex_query_device_resp core;
		if (!ex) {
			struct mlx5_ib_query_device_resp r;
			fake_query_device(&dev, &core, &r);
			respond(resp, &core.base, sizeof(core.base), NULL, 0, outlen);
			trace_cmd(name, drv, drvlen, NULL, 0, NULL, NULL);
			return 0;
		}
		struct mlx5_ib_query_device_resp r;
		fake_query_device(&dev, &core, &r);
		// response_length: what the kernel wrote of the core response.
		size_t corelen = outlen < sizeof(core) ? outlen : sizeof(core);
		core.response_length = corelen;
		respond(resp, &core, sizeof(core), &r, sizeof(r), outlen);
		trace_cmd(name, drv, drvlen, &r, sizeof(r), NULL, NULL);
		return 0;
	}
	case IB_USER_VERBS_CMD_QUERY_PORT: {
		struct ib_uverbs_query_port_resp core;
		if (roce)
			fake_roce_port(&dev, &core);
		else
			fake_query_port(&dev, &core);
		respond(resp, &core, sizeof(core), NULL, 0, outlen);
		snprintf(extra, sizeof(extra), "port=%u", in[8]);
		if (!quiet)
			trace_cmd(name, drv, drvlen, NULL, 0, NULL, extra);
		return 0;
	}
	case IB_USER_VERBS_CMD_ALLOC_PD: {
		struct ib_uverbs_alloc_pd_resp core = {nhandle++};
		struct mlx5_ib_alloc_pd_resp r = {dev.pdn_base + npd++};
		respond(resp, &core, sizeof(core), &r, sizeof(r), outlen);
		trace_cmd(name, drv, drvlen, &r, sizeof(r), NULL, NULL);
		return 0;
	}
	case IB_USER_VERBS_CMD_REG_MR: {
		const struct ib_uverbs_reg_mr *m = (const void *)(in - 0);
		struct ib_uverbs_reg_mr_resp core = {nhandle++, dev.mkey_base + 0x100 * nmr, dev.mkey_base + 0x100 * nmr};
		nmr++;
		char s[64];
		sym(s, sizeof(s), m->start);
		snprintf(extra, sizeof(extra), "start=%s len=%llu access=0x%x", s, (unsigned long long)m->length,
			 m->access_flags);
		respond(resp, &core, sizeof(core), NULL, 0, outlen);
		char rn[32];
		snprintf(rn, sizeof(rn), "mr%u", nmr - 1);
		add_region(rn, (void *)(uintptr_t)m->start, m->length, 0);
		trace_cmd(name, drv, drvlen, NULL, 0, NULL, extra);
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: {
		struct ib_uverbs_create_comp_channel_resp core;
		int p[2];
		if (nchan == MAXOBJ || pipe2(p, O_CLOEXEC) < 0)
			return fail(ENOMEM);
		chan_rfd[nchan] = p[0];
		chan_wfd[nchan++] = p[1];
		core.fd = p[0];
		respond(resp, &core, sizeof(core), NULL, 0, outlen);
		trace_cmd(name, drv, drvlen, NULL, 0, NULL, NULL);
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_CQ: {
		uint32_t cqe;
		memcpy(&cqe, in + (ex ? 8 : 16), 4); // legacy: after response and user_handle
		struct mlx5_ib_create_cq u = {0};
		memcpy(&u, drv, drvlen < sizeof(u) ? drvlen : sizeof(u));
		// The kernel rounds cqe+1 up to a power of two
		// (mlx5_ib_create_cq) and answers with one less.
		uint32_t nent = 1;
		while (nent < cqe + 1 && nent)
			nent <<= 1;
		if (ncq == MAXOBJ || (u.cqe_size != 64 && u.cqe_size != 128) || !nent || cqe > dev.max_cqe)
			return fail(EINVAL);
		cqe = nent - 1;
		struct cq *q = &cqs[ncq];
		q->live = 1;
		int32_t ch;
		memcpy(&q->user_handle, in + (ex ? 0 : 8), 8);
		memcpy(&ch, in + (ex ? 16 : 24), 4);
		q->chan_wfd = -1;
		for (int i = 0; i < nchan; i++)
			if (chan_rfd[i] == ch)
				q->chan_wfd = chan_wfd[i];
		q->cqn = dev.cqn_base + ncq;
		q->nent = nent;
		q->cqe_size = u.cqe_size;
		q->buf = (uint8_t *)(uintptr_t)u.buf_addr;
		q->pi = 0;
		char rn[32];
		snprintf(rn, sizeof(rn), "cq%d.buf", ncq);
		add_region(rn, q->buf, (size_t)nent * u.cqe_size, 0);
		snprintf(rn, sizeof(rn), "cq%d.db", ncq);
		add_region(rn, (void *)(uintptr_t)u.db_addr, 8, 0);
		struct mlx5_ib_create_cq_resp r = {q->cqn, 0};
		uint8_t core[16] = {0};
		uint32_t h = new_handle("cq", ncq);
		memcpy(core, &h, 4);
		memcpy(core + 4, &cqe, 4);
		uint32_t rl = 16;
		memcpy(core + 12, &rl, 4);
		respond(resp, core, ex ? 16 : 8, &r, sizeof(r), outlen);
		static const int a[] = {0, 8, -1};
		snprintf(extra, sizeof(extra), "cq=%d cqe=%u", ncq, cqe);
		ncq++;
		trace_cmd(name, drv, drvlen, &r, sizeof(r), a, extra);
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_QP: {
		const uint8_t *cap = in + (ex ? 24 : 32); // max_send_wr and the rest of ib_uverbs_qp_cap
		struct mlx5_ib_create_qp u = {0};
		memcpy(&u, drv, drvlen < sizeof(u) ? drvlen : sizeof(u));
		if (nqp == MAXOBJ)
			return fail(ENOMEM);
		struct qp *q = &qps[nqp];
		q->live = 1;
		q->qpn = dev.qpn_base + nqp;
		q->uidx = u.uidx;
		uint32_t rq = u.rq_wqe_count << u.rq_wqe_shift, sq = u.sq_wqe_count * 64;
		char rn[32];
		snprintf(rn, sizeof(rn), "qp%d.buf", nqp);
		add_region(rn, (void *)(uintptr_t)u.buf_addr, rq + sq, 0);
		snprintf(rn, sizeof(rn), "qp%d.db", nqp);
		add_region(rn, (void *)(uintptr_t)u.db_addr, 8, 0);
		struct mlx5_ib_create_qp_resp r = {0};
		r.bfreg_index = dev.first_bfreg + nqp;
		uint8_t core[40] = {0};
		uint32_t v[8] = {new_handle("qp", nqp), q->qpn};
		memcpy(v + 2, cap, 20); // max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data
		memcpy(core, v, 28);
		v[0] = 40;
		memcpy(core + 36, v, 4);
		respond(resp, core, ex ? 40 : 32, &r, sizeof(r), outlen);
		static const int a[] = {0, 8, 40, -1};
		uint32_t c5[5];
		memcpy(c5, cap, 20);
		snprintf(extra, sizeof(extra), "qp=%d type=%u cap=%u,%u,%u,%u,%u", nqp, in[ex ? 45 : 53], c5[0], c5[1],
			 c5[2], c5[3], c5[4]);
		nqp++;
		trace_cmd(name, drv, drvlen, &r, sizeof(r), a, extra);
		return 0;
	}
	case IB_USER_VERBS_CMD_MODIFY_QP: {
		// ib_uverbs_modify_qp: qp_state at 80? Trace the mask and state.
		const struct ib_uverbs_modify_qp *m = (const void *)in;
		snprintf(extra, sizeof(extra), "mask=0x%x state=%u", m->attr_mask, m->qp_state);
		if (ex) {
			uint8_t core[8] = {0};
			respond(resp, core, 8, NULL, 0, outlen);
		}
		trace_cmd(name, drv, drvlen, NULL, 0, NULL, extra);
		return 0;
	}
	case IB_USER_VERBS_CMD_CREATE_SRQ: {
		uint32_t maxwr, maxsge;
		memcpy(&maxwr, in + 20, 4);
		memcpy(&maxsge, in + 24, 4);
		struct mlx5_ib_create_srq u = {0};
		memcpy(&u, drv, drvlen < sizeof(u) ? drvlen : sizeof(u));
		// The kernel's buffer: roundup(max_wr+1) WQEs of the next
		// segment and max_sge data segments, at least 32 bytes, rounded
		// up to a power of two (mlx5_ib create_srq_user).
		uint32_t desc = 16 + maxsge * 16, nwqe = 1;
		if (desc < 32)
			desc = 32;
		uint32_t d = 1;
		while (d < desc)
			d <<= 1;
		while (nwqe < maxwr + 1 && nwqe)
			nwqe <<= 1;
		if (nsrq == MAXOBJ || !nwqe || maxwr > dev.max_srq_wr || maxsge > dev.max_srq_sge)
			return fail(EINVAL);
		char rn[32];
		snprintf(rn, sizeof(rn), "srq%u.buf", nsrq);
		add_region(rn, (void *)(uintptr_t)u.buf_addr, (size_t)nwqe * d, 0);
		snprintf(rn, sizeof(rn), "srq%u.db", nsrq);
		add_region(rn, (void *)(uintptr_t)u.db_addr, 8, 0);
		uint32_t core[4] = {new_handle("srq", nsrq), nwqe - 1, maxsge, dev.srqn_base + nsrq};
		struct mlx5_ib_create_srq_resp r = {dev.srqn_base + nsrq, 0};
		respond(resp, core, 16, &r, sizeof(r), outlen);
		static const int a[] = {0, 8, -1};
		snprintf(extra, sizeof(extra), "srq=%u max_wr=%u max_sge=%u", nsrq, maxwr, maxsge);
		nsrq++;
		trace_cmd(name, drv, drvlen, &r, sizeof(r), a, extra);
		return 0;
	}
	case IB_USER_VERBS_CMD_DESTROY_SRQ: {
		uint8_t core[4] = {0};
		destroy(in, ex);
		respond(resp, core, 4, NULL, 0, outlen);
		trace_cmd(name, drv, drvlen, NULL, 0, NULL, NULL);
		return 0;
	}
	case IB_USER_VERBS_CMD_RESIZE_CQ: {
		uint32_t h, cqe;
		memcpy(&h, in + 8, 4);
		memcpy(&cqe, in + 12, 4);
		struct mlx5_ib_resize_cq u = {0};
		memcpy(&u, drv, drvlen < sizeof(u) ? drvlen : sizeof(u));
		if (h >= 1024 || handle_names[h][0] != 'c')
			return fail(EINVAL);
		int n = atoi(handle_names[h] + 2);
		struct cq *q = &cqs[n];
		uint32_t nent = 1;
		while (nent < cqe + 1 && nent)
			nent <<= 1;
		if (!q->live || !nent || cqe > dev.max_cqe || u.cqe_size != q->cqe_size)
			return fail(EINVAL);
		// The device ends the old ring with a RESIZE_CQ CQE.
		uint8_t *slot = q->buf + (size_t)(q->pi & (q->nent - 1)) * q->cqe_size + (q->cqe_size - 64);
		memset(slot, 0, 63);
		slot[63] = 5 << 4 | ((q->pi / q->nent) & 1);
		q->pi++;
		char rn[32];
		snprintf(rn, sizeof(rn), "cq%d", n);
		drop_regions(rn);
		q->buf = (uint8_t *)(uintptr_t)u.buf_addr;
		q->nent = nent;
		snprintf(rn, sizeof(rn), "cq%d.buf", n);
		add_region(rn, q->buf, (size_t)nent * q->cqe_size, 0);
		// The doorbell record stays: add it back.
		snprintf(rn, sizeof(rn), "cq%d.db", n);
		for (int i = nregions - 2; i >= 0; i--)
			if (strcmp(regions[i].name, rn) == 0) {
				regions[i].live = 1;
				break;
			}
		uint32_t core[2] = {nent - 1, 0};
		respond(resp, core, 8, NULL, 0, outlen);
		static const int a[] = {0, -1};
		snprintf(extra, sizeof(extra), "cq=%d cqe=%u", n, nent - 1);
		trace_cmd(name, drv, drvlen, NULL, 0, a, extra);
		return 0;
	}
	case IB_USER_VERBS_CMD_DESTROY_QP: {
		uint8_t core[4] = {0};
		destroy(in, ex);
		respond(resp, core, 4, NULL, 0, outlen);
		trace_cmd(name, drv, drvlen, NULL, 0, NULL, NULL);
		return 0;
	}
	case IB_USER_VERBS_CMD_DESTROY_CQ: {
		uint8_t core[8] = {0};
		destroy(in, ex);
		respond(resp, core, 8, NULL, 0, outlen);
		trace_cmd(name, drv, drvlen, NULL, 0, NULL, NULL);
		return 0;
	}
	case IB_USER_VERBS_CMD_DEREG_MR:
	case IB_USER_VERBS_CMD_DEALLOC_PD:
		trace_cmd(name, drv, drvlen, NULL, 0, NULL, NULL);
		return 0;
	case IB_USER_VERBS_CMD_CREATE_AH:
		return create_ah(in + 24, drv, drvlen, resp, outlen);
	case IB_USER_VERBS_CMD_DESTROY_AH:
		trace_cmd(name, drv, drvlen, NULL, 0, NULL, NULL);
		return 0;
	}
	fprintf(stderr, "fake: command %s not answered\n", name);
	return fail(EOPNOTSUPP);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	if (fd < 0 || fd != devfd)
		return real_write(fd, buf, len);
	const struct ib_uverbs_cmd_hdr *h = buf;
	if (len < sizeof(*h))
		return fail(EINVAL);
	int ex = !!(h->command & IB_USER_VERBS_CMD_FLAG_EXTENDED);
	uint32_t c = h->command & IB_USER_VERBS_CMD_COMMAND_MASK;
	int rc;
	if (ex) {
		const struct ib_uverbs_ex_cmd_hdr *x = (const void *)(h + 1);
		const uint8_t *in = (const uint8_t *)(x + 1);
		size_t inlen = h->in_words * 8, drvlen = x->provider_in_words * 8;
		size_t outlen = (h->out_words + x->provider_out_words) * 8;
		if (sizeof(*h) + sizeof(*x) + inlen + drvlen > len)
			return fail(EINVAL);
		// The ex create/modify commands have an ex response whose size
		// is out_words; driver data follows it.
		size_t corelen = h->out_words * 8;
		if (c == IB_USER_VERBS_CMD_QUERY_DEVICE) {
			// the core response is as long as the caller's room
			struct ib_uverbs_ex_query_device_resp core;
			struct mlx5_ib_query_device_resp r;
			fake_query_device(&dev, &core, &r);
			core.response_length = corelen < sizeof(core) ? corelen : sizeof(core);
			uint8_t *o = (uint8_t *)(uintptr_t)x->response;
			memset(o, 0, outlen);
			memcpy(o, &core, core.response_length);
			size_t rl = x->provider_out_words * 8;
			memcpy(o + corelen, &r, rl < sizeof(r) ? rl : sizeof(r));
			trace_cmd("QUERY_DEVICE_EX", in + inlen, drvlen, &r, sizeof(r), NULL, NULL);
			return len;
		}
		rc = command(c, 1, in, inlen, in + inlen, drvlen, x->response, outlen);
		(void)corelen;
	} else {
		const uint8_t *in = (const uint8_t *)(h + 1);
		size_t total = h->in_words * 4;
		if (total > len || total < sizeof(*h) + 4)
			return fail(EINVAL);
		size_t core = 0, coreout = 0;
		switch (c) {
		case IB_USER_VERBS_CMD_GET_CONTEXT: core = 8; coreout = 8; break;
		case IB_USER_VERBS_CMD_QUERY_PORT: core = 16; coreout = 40; break;
		case IB_USER_VERBS_CMD_QUERY_DEVICE: core = 8; coreout = 176; break;
		case IB_USER_VERBS_CMD_ALLOC_PD: core = 8; coreout = 4; break;
		case IB_USER_VERBS_CMD_DEALLOC_PD: core = 4; break;
		case IB_USER_VERBS_CMD_REG_MR: core = 40; coreout = 12; break;
		case IB_USER_VERBS_CMD_DEREG_MR: core = 4; break;
		case IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL: core = 8; coreout = 4; break;
		case IB_USER_VERBS_CMD_CREATE_CQ: core = 32; coreout = 8; break;
		case IB_USER_VERBS_CMD_DESTROY_CQ: core = 16; coreout = 8; break;
		case IB_USER_VERBS_CMD_RESIZE_CQ: core = 16; coreout = 8; break;
		case IB_USER_VERBS_CMD_CREATE_SRQ: core = 32; coreout = 16; break;
		case IB_USER_VERBS_CMD_DESTROY_SRQ: core = 16; coreout = 4; break;
		case IB_USER_VERBS_CMD_CREATE_QP: core = 56; coreout = 32; break;
		case IB_USER_VERBS_CMD_MODIFY_QP: core = 112; break;
		case IB_USER_VERBS_CMD_DESTROY_QP: core = 16; coreout = 4; break;
		case IB_USER_VERBS_CMD_CREATE_AH: core = 56; coreout = 4; break;
		case IB_USER_VERBS_CMD_DESTROY_AH: core = 4; break;
		default: core = total - sizeof(*h);
		}
		size_t inlen = total - sizeof(*h);
		if (core > inlen)
			return fail(EINVAL);
		uint64_t resp = 0;
		if (coreout)
			memcpy(&resp, in, 8);
		(void)coreout;
		rc = command(c, 0, in, core, in + core, inlen - core, resp, h->out_words * 4);
	}
	return rc < 0 ? -1 : (ssize_t)len;
}
