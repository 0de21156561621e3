// SPDX-License-Identifier: GPL-2.0
// A switch port's ECN marking for the namespace bed, whose kernel has no RED or fq_codel: a tc clsact egress
// program (direct action) that keeps a model of the link's shaper (tbf) in front of it and marks ECN-capable IPv4
// and IPv6 packets CE while the model's queue holds more than THRESHOLD bytes (DCTCP's step marking on the
// instantaneous queue, PANAMA's fabric). The model is fed with every packet the device is asked to send (it runs
// before the qdisc, so it sees the sender's bursts as the shaper does) and is the shaper's own: a token bucket of
// BURST_BYTES filled at RATE_BPS; a packet that finds enough tokens leaves at once, one that does not waits in the
// queue, which drains at RATE_BPS. With RATE_BPS the shaper's rate its queue is the real queue. A little below it,
// the queue builds before the real one does and marks come earlier (HULL's phantom queue).
//
// Until 2026-11-27 the model had no bucket: its queue was the real queue plus the burst the shaper had let through,
// so on a busy link with a burst (512 KiB on the bed) above the threshold (256 KiB) every packet was marked however
// short the real queue: a lone TCP flow had 110,868 of 110,948 packets marked at a real queue of at most a packet.
//
// Built per bed by scripts/lib/emulation.sh (ecn_marker): clang -O2 -g -target bpf -DRATE_BPS=... -DTHRESHOLD=...
// -DBURST_BYTES=... Each attach loads its own copy, so every link has its own queue. Counters (packets seen, marked)
// are in the map's value; `bpftool map dump` shows them where bpftool is installed.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <stddef.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef RATE_BPS
#define RATE_BPS 950000000ULL
#endif
#ifndef THRESHOLD
#define THRESHOLD (256 * 1024ULL)
#endif
#ifndef BURST_BYTES
#define BURST_BYTES 0ULL
#endif

struct phantom {
	struct bpf_spin_lock lock;
	__u64 last_ns;
	__u64 backlog;
	__u64 tokens;
	__u64 seen;
	__u64 marked;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct phantom);
} ecn_phantom SEC(".maps");

#define ECN_MASK 0x3
#define ECN_CE 0x3
#define IPV6_ECN_MASK 0x0030

SEC("tc")
int ecn_mark(struct __sk_buff *skb)
{
	__u32 key = 0;
	struct phantom *q = bpf_map_lookup_elem(&ecn_phantom, &key);
	if (!q)
		return TC_ACT_OK;
	__u64 now = bpf_ktime_get_ns();
	int mark;
	bpf_spin_lock(&q->lock);
	__u64 elapsed = now - q->last_ns;
	if (elapsed > 1000000000ULL)
		elapsed = 1000000000ULL;
	q->last_ns = now;
	// bytes drained: elapsed ns x RATE_BPS / 8e9, in two steps so that it stays within 64 bits
	__u64 drained = elapsed * (RATE_BPS / 1000ULL) / 8000000ULL;
	if (q->backlog > drained) {
		q->backlog -= drained;
	} else {
		// the queue emptied: what the link could have sent beyond it fills the bucket, up to its size
		__u64 spare = drained - q->backlog;
		q->backlog = 0;
		q->tokens = q->tokens + spare > BURST_BYTES ? BURST_BYTES : q->tokens + spare;
	}
	if (q->backlog == 0 && q->tokens >= skb->len)
		q->tokens -= skb->len; // leaves at once, on the bucket's tokens
	else
		q->backlog += skb->len;
	q->seen++;
	mark = q->backlog > THRESHOLD;
	bpf_spin_unlock(&q->lock);
	if (!mark)
		return TC_ACT_OK;

	__u16 word;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN, &word, 2) < 0)
			return TC_ACT_OK;
		__u16 old = bpf_ntohs(word);
		if ((old & ECN_MASK) == 0 || (old & ECN_MASK) == ECN_CE)
			return TC_ACT_OK; // Not-ECT is never marked; CE already is
		__u16 new = old | ECN_CE;
		bpf_l3_csum_replace(skb, ETH_HLEN + offsetof(struct iphdr, check), bpf_htons(old), bpf_htons(new), 2);
		word = bpf_htons(new);
		bpf_skb_store_bytes(skb, ETH_HLEN, &word, 2, 0);
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		if (bpf_skb_load_bytes(skb, ETH_HLEN, &word, 2) < 0)
			return TC_ACT_OK;
		__u16 old = bpf_ntohs(word);
		if ((old & IPV6_ECN_MASK) == 0 || (old & IPV6_ECN_MASK) == IPV6_ECN_MASK)
			return TC_ACT_OK;
		word = bpf_htons(old | IPV6_ECN_MASK);
		bpf_skb_store_bytes(skb, ETH_HLEN, &word, 2, 0);
	} else {
		return TC_ACT_OK;
	}
	__sync_fetch_and_add(&q->marked, 1);
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
