package io.netreduce.protocol.port;

/**
 * Constants and struct layouts of AF_XDP sockets (linux/if_xdp.h) and of the bpf(2) calls the {@link AfXdpPort}
 * makes (linux/bpf.h, linux/if_link.h), as on x86-64 Linux 6.x. Offsets are byte offsets within the named struct
 * or union member; sizes are {@code sizeof}. Kept apart from {@link LinuxPacketAbi} so each can be checked against
 * its own headers.
 */
final class XdpAbi
{
    // ---------------------------------------------------------------------------------------------------------
    // AF_XDP socket, options and mmap offsets (linux/if_xdp.h)
    // ---------------------------------------------------------------------------------------------------------

    static final int AF_XDP = 44;
    static final int SOL_XDP = 283;

    static final int XDP_MMAP_OFFSETS = 1;
    static final int XDP_RX_RING = 2;
    static final int XDP_TX_RING = 3;
    static final int XDP_UMEM_REG = 4;
    static final int XDP_UMEM_FILL_RING = 5;
    static final int XDP_UMEM_COMPLETION_RING = 6;
    static final int XDP_STATISTICS = 7;

    /** mmap(2) offsets selecting which ring of the socket to map. */
    static final long XDP_PGOFF_RX_RING = 0;
    static final long XDP_PGOFF_TX_RING = 0x80000000L;
    static final long XDP_UMEM_PGOFF_FILL_RING = 0x100000000L;
    static final long XDP_UMEM_PGOFF_COMPLETION_RING = 0x180000000L;

    /** sockaddr_xdp.sxdp_flags: force the copy path (the kernel copies frames between its buffers and the UMEM). */
    static final int XDP_COPY = 1 << 1;
    /** sockaddr_xdp.sxdp_flags: force zero-copy (the driver DMAs straight into the UMEM); refused if unsupported. */
    static final int XDP_ZEROCOPY = 1 << 2;
    /** The kernel sets XDP_RING_NEED_WAKEUP on a ring when it must be kicked by a system call to make progress. */
    static final int XDP_USE_NEED_WAKEUP = 1 << 3;
    /** Multi-buffer: a frame longer than a chunk arrives (and may be sent) as several descriptors. */
    static final int XDP_USE_SG = 1 << 4;

    /** Ring flags word bit: user space must kick the kernel (sendto for TX, recvfrom/poll for fill). */
    static final int XDP_RING_NEED_WAKEUP = 1;

    /** xdp_desc.options: more descriptors of the same frame follow. */
    static final int XDP_PKT_CONTD = 1;

    /** Bytes the kernel keeps in front of received data in each chunk (the XDP program's headroom). */
    static final int XDP_PACKET_HEADROOM = 256;
    /** Smallest UMEM chunk the kernel accepts. */
    static final int XDP_UMEM_MIN_CHUNK_SIZE = 2048;

    // struct xdp_ring_offset (32 bytes), four of them in struct xdp_mmap_offsets (rx, tx, fr, cr)
    static final int RING_OFFSET_PRODUCER = 0;     // __u64 producer
    static final int RING_OFFSET_CONSUMER = 8;     // __u64 consumer
    static final int RING_OFFSET_DESC = 16;        // __u64 desc
    static final int RING_OFFSET_FLAGS = 24;       // __u64 flags
    static final int RING_OFFSET_SIZE = 32;
    static final int MMAP_OFFSETS_RX = 0;
    static final int MMAP_OFFSETS_TX = 32;
    static final int MMAP_OFFSETS_FILL = 64;
    static final int MMAP_OFFSETS_COMPLETION = 96;
    static final int MMAP_OFFSETS_SIZE = 128;

    // struct xdp_umem_reg (32 bytes)
    static final int UMEM_REG_ADDR_OFFSET = 0;          // __u64 addr
    static final int UMEM_REG_LEN_OFFSET = 8;           // __u64 len
    static final int UMEM_REG_CHUNK_SIZE_OFFSET = 16;   // __u32 chunk_size
    static final int UMEM_REG_HEADROOM_OFFSET = 20;     // __u32 headroom
    static final int UMEM_REG_FLAGS_OFFSET = 24;        // __u32 flags
    static final int UMEM_REG_TX_METADATA_LEN_OFFSET = 28; // __u32 tx_metadata_len
    static final int UMEM_REG_SIZE = 32;

    // struct sockaddr_xdp (16 bytes)
    static final int SOCKADDR_XDP_FAMILY_OFFSET = 0;    // __u16 sxdp_family
    static final int SOCKADDR_XDP_FLAGS_OFFSET = 2;     // __u16 sxdp_flags
    static final int SOCKADDR_XDP_IFINDEX_OFFSET = 4;   // __u32 sxdp_ifindex
    static final int SOCKADDR_XDP_QUEUE_ID_OFFSET = 8;  // __u32 sxdp_queue_id
    static final int SOCKADDR_XDP_SIZE = 16;            // + __u32 sxdp_shared_umem_fd

    // struct xdp_desc (16 bytes), the RX and TX ring entries; fill and completion entries are a bare __u64 address
    static final int DESC_ADDR_OFFSET = 0;              // __u64 addr
    static final int DESC_LEN_OFFSET = 8;               // __u32 len
    static final int DESC_OPTIONS_OFFSET = 12;          // __u32 options
    static final int DESC_SIZE = 16;
    static final int ADDRESS_ENTRY_SIZE = 8;

    // struct xdp_statistics (48 bytes): counters since the socket was created (not reset on read)
    static final int STATISTICS_RX_DROPPED_OFFSET = 0;
    static final int STATISTICS_RX_INVALID_DESCS_OFFSET = 8;
    static final int STATISTICS_TX_INVALID_DESCS_OFFSET = 16;
    static final int STATISTICS_RX_RING_FULL_OFFSET = 24;
    static final int STATISTICS_RX_FILL_RING_EMPTY_OFFSET = 32;
    static final int STATISTICS_TX_RING_EMPTY_OFFSET = 40;
    static final int STATISTICS_SIZE = 48;

    // ---------------------------------------------------------------------------------------------------------
    // bpf(2) (linux/bpf.h)
    // ---------------------------------------------------------------------------------------------------------

    /** __NR_bpf on x86-64. */
    static final long SYS_BPF = 321;

    static final int BPF_MAP_CREATE = 0;
    static final int BPF_MAP_UPDATE_ELEM = 2;
    static final int BPF_PROG_LOAD = 5;
    static final int BPF_LINK_CREATE = 28;

    static final int BPF_MAP_TYPE_XSKMAP = 17;
    static final int BPF_PROG_TYPE_XDP = 6;
    /** enum bpf_attach_type BPF_XDP: a program attached to a device's XDP hook by BPF_LINK_CREATE. */
    static final int BPF_XDP = 37;
    /** prog_flags: the program copes with multi-buffer frames (it reads no packet data), so jumbo MTUs stay. */
    static final int BPF_F_XDP_HAS_FRAGS = 1 << 5;

    /** XDP attach flags (linux/if_link.h): the generic (skb) hook, or the driver's native one. */
    static final int XDP_FLAGS_SKB_MODE = 1 << 1;
    static final int XDP_FLAGS_DRV_MODE = 1 << 2;

    /** Bytes of union bpf_attr passed: larger than every command's member used here, zero past the fields set. */
    static final int BPF_ATTR_SIZE = 160;

    // union bpf_attr, BPF_MAP_CREATE member
    static final int MAP_CREATE_MAP_TYPE_OFFSET = 0;    // __u32 map_type
    static final int MAP_CREATE_KEY_SIZE_OFFSET = 4;    // __u32 key_size
    static final int MAP_CREATE_VALUE_SIZE_OFFSET = 8;  // __u32 value_size
    static final int MAP_CREATE_MAX_ENTRIES_OFFSET = 12; // __u32 max_entries
    static final int MAP_CREATE_MAP_NAME_OFFSET = 28;   // char map_name[16] (after map_flags, inner_map_fd, numa_node)

    // union bpf_attr, BPF_MAP_*_ELEM member
    static final int MAP_ELEM_MAP_FD_OFFSET = 0;        // __u32 map_fd
    static final int MAP_ELEM_KEY_OFFSET = 8;           // __aligned_u64 key (pointer)
    static final int MAP_ELEM_VALUE_OFFSET = 16;        // __aligned_u64 value (pointer)
    static final int MAP_ELEM_FLAGS_OFFSET = 24;        // __u64 flags

    // union bpf_attr, BPF_PROG_LOAD member
    static final int PROG_LOAD_PROG_TYPE_OFFSET = 0;    // __u32 prog_type
    static final int PROG_LOAD_INSN_CNT_OFFSET = 4;     // __u32 insn_cnt
    static final int PROG_LOAD_INSNS_OFFSET = 8;        // __aligned_u64 insns (pointer)
    static final int PROG_LOAD_LICENSE_OFFSET = 16;     // __aligned_u64 license (pointer to a C string)
    static final int PROG_LOAD_LOG_LEVEL_OFFSET = 24;   // __u32 log_level
    static final int PROG_LOAD_LOG_SIZE_OFFSET = 28;    // __u32 log_size
    static final int PROG_LOAD_LOG_BUF_OFFSET = 32;     // __aligned_u64 log_buf (pointer)
    static final int PROG_LOAD_PROG_FLAGS_OFFSET = 44;  // __u32 prog_flags (after kern_version)
    static final int PROG_LOAD_PROG_NAME_OFFSET = 48;   // char prog_name[16]
    static final int PROG_LOAD_EXPECTED_ATTACH_TYPE_OFFSET = 68; // __u32 (after prog_ifindex)

    // union bpf_attr, BPF_LINK_CREATE member
    static final int LINK_CREATE_PROG_FD_OFFSET = 0;    // __u32 prog_fd
    static final int LINK_CREATE_TARGET_IFINDEX_OFFSET = 4; // __u32 target_ifindex
    static final int LINK_CREATE_ATTACH_TYPE_OFFSET = 8; // __u32 attach_type
    static final int LINK_CREATE_FLAGS_OFFSET = 12;     // __u32 flags

    /** Length of BPF object names, NUL included. */
    static final int BPF_OBJ_NAME_LEN = 16;

    private XdpAbi()
    {
    }
}
