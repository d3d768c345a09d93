// A cgroup/connect4 program: a client on this host that connects to
// 127.x.y.z:<port> of a port that leads into a service's namespace is
// connected to <the namespace's address>:<port> instead, at connect(2),
// before any packet exists. The nftables DNAT of the same port (and the
// masquerade of the loopback source) stay for every other client; this
// only spares local clients the per-packet translation (connect-redirect.ts
// says why; bench/README.md, local-netns, what it saves).
//
// Built by scripts/build-bpf.mjs (clang -target bpf) into dist/bpf/; loaded
// and fed by connect-redirect.ts with bpftool. Self-contained on purpose
// (only <linux/bpf.h>): no libbpf headers are needed to build it.

#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int(*name)[val]
#define __type(name, val) typeof(val) *name

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)BPF_FUNC_map_lookup_elem;
static __u64 (*bpf_get_netns_cookie)(void *ctx) = (void *)BPF_FUNC_get_netns_cookie;

// Port (host order) -> the namespace's IPv4 address (network order).
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u32);
} ports SEC(".maps");

SEC("cgroup/connect4")
int basin_connect4(struct bpf_sock_addr *ctx) {
  // TCP only (IPPROTO_TCP is 6).
  if (ctx->protocol != 6) return 1;
  // Only sockets of the host's own network namespace: inside a service's
  // namespace 127.0.0.1 is that namespace's loopback, and is left alone.
  // (A NULL context gives the initial namespace's cookie.)
  if (bpf_get_netns_cookie(ctx) != bpf_get_netns_cookie(0)) return 1;
  // 127.0.0.0/8: the address is in network order, its first byte first.
  __u32 ip4 = ctx->user_ip4;
  if (((__u8 *)&ip4)[0] != 127) return 1;
  // The port is in network order too (a little-endian host: Basin loads
  // this program on no other, connect-redirect.ts).
  __u32 port = __builtin_bswap16((__u16)ctx->user_port);
  __u32 *address = bpf_map_lookup_elem(&ports, &port);
  if (address) ctx->user_ip4 = *address;
  // 1: let the connect go on (to the new address, or as it was).
  return 1;
}

char _license[] SEC("license") = "GPL";
