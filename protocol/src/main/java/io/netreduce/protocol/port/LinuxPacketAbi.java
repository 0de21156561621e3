package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;

/**
 * Linux constants and struct layouts used by {@link AfPacketPort}, checked against
 * {@code /usr/include/linux/if_packet.h}, {@code linux/if_ether.h}, {@code bits/socket.h} and {@code sys/mman.h}
 * for x86-64 and aarch64 (LP64, little-endian).
 * <p>
 * Offsets are byte offsets within the named struct; sizes are {@code sizeof}. Kept in one place so a reviewer can
 * compare them line by line with the headers.
 */
final class LinuxPacketAbi
{
    // ---------------------------------------------------------------------------------------------------------
    // socket(2), bind(2), setsockopt(2)
    // ---------------------------------------------------------------------------------------------------------

    /** Address family of packet sockets (linux/socket.h). */
    static final int AF_PACKET = 17;
    /** Raw packets including the link-level header. */
    static final int SOCK_RAW = 3;
    /** Close the descriptor in child processes: the daemon never wants ports inherited. */
    static final int SOCK_CLOEXEC = 0x80000;
    /** Every protocol (linux/if_ether.h); network byte order is required by socket() and sockaddr_ll. */
    static final int ETH_P_ALL = 0x0003;
    /** Socket option level for packet sockets. */
    static final int SOL_PACKET = 263;
    /** Generic socket level, for SO_SNDBUF-style options. */
    static final int SOL_SOCKET = 1;

    /** Join a membership (promiscuous mode here), taking a struct packet_mreq. */
    static final int PACKET_ADD_MEMBERSHIP = 1;
    /** Set up a receive ring from a struct tpacket_req / tpacket_req3. */
    static final int PACKET_RX_RING = 5;
    /** Read and reset struct tpacket_stats(_v3): packets seen and dropped since the last read. */
    static final int PACKET_STATISTICS = 6;
    /** Choose the ring header layout (TPACKET_V1/V2/V3); must precede the ring set-up. */
    static final int PACKET_VERSION = 10;
    /** Set up a transmit ring from a struct tpacket_req. */
    static final int PACKET_TX_RING = 13;
    /** On a malformed TX frame, skip it (mark it available) instead of stalling the ring with WRONG_FORMAT. */
    static final int PACKET_LOSS = 14;
    /** Prepend a struct virtio_net_hdr to every frame sent and received (segmentation and checksum offload). */
    static final int PACKET_VNET_HDR = 15;
    /** Send straight to the driver queue, skipping the qdisc layer (and so tc). */
    static final int PACKET_QDISC_BYPASS = 20;
    /** Do not deliver the host's outgoing frames to this socket (Linux 4.20+). */
    static final int PACKET_IGNORE_OUTGOING = 23;
    /** Join (or create) a fanout group: int = group id | mode << 16 | flags << 16; read back the same way. */
    static final int PACKET_FANOUT = 18;
    /** Set the classifier of a PACKET_FANOUT_CBPF group: a struct sock_fprog; any member may replace it. */
    static final int PACKET_FANOUT_DATA = 22;
    /** Fanout mode: a classic BPF program returns the member index (modulo the member count). */
    static final int PACKET_FANOUT_CBPF = 6;
    /** Fanout flag: let the kernel pick a group id no other socket in the namespace uses (Linux 4.8+). */
    static final int PACKET_FANOUT_FLAG_UNIQUEID = 0x2000;
    /**
     * Fanout flag: do not hand the group the host's own transmissions (Linux 4.20+). A group has one packet hook of
     * its own, so its members' PACKET_IGNORE_OUTGOING does not apply: without this flag every frame a lane sends
     * comes back into a lane's receive ring (skipped there, but taking a slot).
     */
    static final int PACKET_FANOUT_FLAG_IGNORE_OUTGOING = 0x4000;
    /** SOL_SOCKET option: attach a classic BPF socket filter (struct sock_fprog). */
    static final int SO_ATTACH_FILTER = 26;
    /** The socket's send buffer (the kernel doubles the value and caps it at net.core.wmem_max). */
    static final int SO_SNDBUF = 7;
    /** SO_SNDBUF past net.core.wmem_max, for CAP_NET_ADMIN. */
    static final int SO_SNDBUFFORCE = 32;
    /** SOL_SOCKET option: the mark (skb->mark) of every frame the socket sends (CAP_NET_RAW or CAP_NET_ADMIN). */
    static final int SO_MARK = 36;
    /** SOL_SOCKET option: remove the socket filter. */
    static final int SO_DETACH_FILTER = 27;

    /** Ring header layout version 2: fixed-size frame slots, each with its own status; TX and the V2 RX ring. */
    static final int TPACKET_V2 = 1;
    /** Ring header layout version 3: variable-size frames packed into blocks, used for the V3 RX ring. */
    static final int TPACKET_V3 = 2;

    /** packet_mreq.mr_type: put the interface into promiscuous mode for as long as the socket lives. */
    static final int PACKET_MR_PROMISC = 1;

    /** sockaddr_ll.sll_pkttype of a frame the host itself sent. */
    static final int PACKET_OUTGOING = 4;

    /** sendto(2) flag: do not wait for the TX ring to drain. */
    static final int MSG_DONTWAIT = 0x40;

    /** ioctl(2) request reading struct ifreq.ifr_mtu (linux/sockios.h). */
    static final long SIOCGIFMTU = 0x8921;
    /** ioctl(2) request reading struct ifreq.ifr_hwaddr (a struct sockaddr: family, then the MAC). */
    static final long SIOCGIFHWADDR = 0x8927;

    // ---------------------------------------------------------------------------------------------------------
    // errno values the port reacts to (asm-generic/errno-base.h, errno.h)
    // ---------------------------------------------------------------------------------------------------------

    static final int EINTR = 4;
    static final int EAGAIN = 11;
    static final int EBUSY = 16;
    static final int EINVAL = 22;
    static final int ENOBUFS = 105;
    /** accept(2): a connection went away before it was taken (the sidecar agent's socket, UnixFdListener). */
    static final int ECONNABORTED = 103;

    // ---------------------------------------------------------------------------------------------------------
    // mmap(2)
    // ---------------------------------------------------------------------------------------------------------

    static final int PROT_READ = 0x1;
    static final int PROT_WRITE = 0x2;
    static final int MAP_SHARED = 0x01;
    static final int MAP_PRIVATE = 0x02;
    static final int MAP_ANONYMOUS = 0x20;
    /** Fault the mapping's pages in now instead of on first touch. */
    static final int MAP_POPULATE = 0x8000;
    /** mmap's failure value, (void *) -1. */
    static final long MAP_FAILED = -1L;

    // ---------------------------------------------------------------------------------------------------------
    // open(2), setns(2)
    // ---------------------------------------------------------------------------------------------------------

    static final int O_RDONLY = 0;
    static final int O_CLOEXEC = 0x80000;
    /** setns nstype: the descriptor must refer to a network namespace. */
    static final int CLONE_NEWNET = 0x40000000;

    // ---------------------------------------------------------------------------------------------------------
    // Ring status words (tp_status / block_status)
    // ---------------------------------------------------------------------------------------------------------

    /** RX: the kernel owns the block. */
    static final int TP_STATUS_KERNEL = 0;
    /** RX: the block (V3) or frame (V2) belongs to user space. */
    static final int TP_STATUS_USER = 1;
    /** RX (V2): the frame did not fit its slot and a full copy went to the socket queue (only with copy_thresh). */
    static final int TP_STATUS_COPY = 1 << 1;
    /** RX (V2): the kernel dropped frames since the statistics were last read. */
    static final int TP_STATUS_LOSING = 1 << 2;
    /** RX: the L4 checksum is left for offload (only the pseudo-header sum is present). */
    static final int TP_STATUS_CSUMNOTREADY = 1 << 3;
    /**
     * RX: the frame arrived with a VLAN tag that the kernel (or the NIC's VLAN offload) took off the frame's bytes
     * into tp_vlan_tci: the bytes the ring holds are untagged.
     */
    static final int TP_STATUS_VLAN_VALID = 1 << 4;
    /** TX: the slot is free for user space to fill. */
    static final int TP_STATUS_AVAILABLE = 0;
    /** TX: user space filled the slot and asks the kernel to send it. */
    static final int TP_STATUS_SEND_REQUEST = 1;
    /** TX: the kernel is sending the slot. */
    static final int TP_STATUS_SENDING = 1 << 1;
    /** TX: the kernel rejected the slot's contents. */
    static final int TP_STATUS_WRONG_FORMAT = 1 << 2;

    /** Frames and headers in rings are aligned to this. */
    static final int TPACKET_ALIGNMENT = 16;

    // ---------------------------------------------------------------------------------------------------------
    // struct sockaddr_ll (20 bytes)
    // ---------------------------------------------------------------------------------------------------------

    static final int SOCKADDR_LL_FAMILY_OFFSET = 0;      // unsigned short sll_family
    static final int SOCKADDR_LL_PROTOCOL_OFFSET = 2;    // __be16 sll_protocol
    static final int SOCKADDR_LL_IFINDEX_OFFSET = 4;     // int sll_ifindex
    static final int SOCKADDR_LL_HATYPE_OFFSET = 8;      // unsigned short sll_hatype
    static final int SOCKADDR_LL_PKTTYPE_OFFSET = 10;    // unsigned char sll_pkttype
    static final int SOCKADDR_LL_HALEN_OFFSET = 11;      // unsigned char sll_halen
    static final int SOCKADDR_LL_ADDR_OFFSET = 12;       // unsigned char sll_addr[8]
    static final int SOCKADDR_LL_SIZE = 20;

    // ---------------------------------------------------------------------------------------------------------
    // struct packet_mreq (16 bytes)
    // ---------------------------------------------------------------------------------------------------------

    static final int PACKET_MREQ_IFINDEX_OFFSET = 0;     // int mr_ifindex
    static final int PACKET_MREQ_TYPE_OFFSET = 4;        // unsigned short mr_type
    static final int PACKET_MREQ_ALEN_OFFSET = 6;        // unsigned short mr_alen
    static final int PACKET_MREQ_SIZE = 16;              // + unsigned char mr_address[8]

    // ---------------------------------------------------------------------------------------------------------
    // struct tpacket_req (16 bytes) and struct tpacket_req3 (28 bytes), sharing their first four fields
    // ---------------------------------------------------------------------------------------------------------

    static final int TPACKET_REQ_BLOCK_SIZE_OFFSET = 0;        // unsigned int tp_block_size
    static final int TPACKET_REQ_BLOCK_NR_OFFSET = 4;          // unsigned int tp_block_nr
    static final int TPACKET_REQ_FRAME_SIZE_OFFSET = 8;        // unsigned int tp_frame_size
    static final int TPACKET_REQ_FRAME_NR_OFFSET = 12;         // unsigned int tp_frame_nr
    static final int TPACKET_REQ_SIZE = 16;
    static final int TPACKET_REQ3_RETIRE_BLK_TOV_OFFSET = 16;  // unsigned int tp_retire_blk_tov (ms)
    static final int TPACKET_REQ3_SIZEOF_PRIV_OFFSET = 20;     // unsigned int tp_sizeof_priv
    static final int TPACKET_REQ3_FEATURE_REQ_WORD_OFFSET = 24; // unsigned int tp_feature_req_word
    static final int TPACKET_REQ3_SIZE = 28;

    // ---------------------------------------------------------------------------------------------------------
    // struct tpacket_stats (8 bytes, V1/V2) and struct tpacket_stats_v3 (12 bytes), sharing their first two fields;
    // getsockopt copies at most the version's own size, so a 12-byte buffer serves both
    // ---------------------------------------------------------------------------------------------------------

    static final int TPACKET_STATS_PACKETS_OFFSET = 0;         // unsigned int tp_packets
    static final int TPACKET_STATS_DROPS_OFFSET = 4;           // unsigned int tp_drops
    static final int TPACKET_STATS_SIZE = 8;
    static final int TPACKET_STATS_V3_FREEZE_Q_CNT_OFFSET = 8; // unsigned int tp_freeze_q_cnt
    static final int TPACKET_STATS_V3_SIZE = 12;

    // ---------------------------------------------------------------------------------------------------------
    // struct tpacket_block_desc (V3 RX block header): version, offset_to_priv, then struct tpacket_hdr_v1
    // ---------------------------------------------------------------------------------------------------------

    static final int BLOCK_DESC_VERSION_OFFSET = 0;            // __u32 version
    static final int BLOCK_DESC_OFFSET_TO_PRIV_OFFSET = 4;     // __u32 offset_to_priv
    static final int BLOCK_DESC_BLOCK_STATUS_OFFSET = 8;       // __u32 hdr.bh1.block_status
    static final int BLOCK_DESC_NUM_PKTS_OFFSET = 12;          // __u32 hdr.bh1.num_pkts
    static final int BLOCK_DESC_OFFSET_TO_FIRST_PKT_OFFSET = 16; // __u32 hdr.bh1.offset_to_first_pkt
    static final int BLOCK_DESC_BLK_LEN_OFFSET = 20;           // __u32 hdr.bh1.blk_len
    static final int BLOCK_DESC_SEQ_NUM_OFFSET = 24;           // __aligned_u64 hdr.bh1.seq_num
    static final int BLOCK_DESC_SIZE = 48;                     // + ts_first_pkt, ts_last_pkt (8 bytes each)

    // ---------------------------------------------------------------------------------------------------------
    // struct tpacket3_hdr (48 bytes), followed by struct sockaddr_ll at TPACKET_ALIGN(48) = 48
    // ---------------------------------------------------------------------------------------------------------

    static final int TPACKET3_HDR_NEXT_OFFSET_OFFSET = 0;      // __u32 tp_next_offset (0 for the last frame)
    static final int TPACKET3_HDR_SEC_OFFSET = 4;              // __u32 tp_sec
    static final int TPACKET3_HDR_NSEC_OFFSET = 8;             // __u32 tp_nsec
    static final int TPACKET3_HDR_SNAPLEN_OFFSET = 12;         // __u32 tp_snaplen (bytes present in the ring)
    static final int TPACKET3_HDR_LEN_OFFSET = 16;             // __u32 tp_len (bytes on the wire)
    static final int TPACKET3_HDR_STATUS_OFFSET = 20;          // __u32 tp_status
    static final int TPACKET3_HDR_MAC_OFFSET = 24;             // __u16 tp_mac (frame start, from the header)
    static final int TPACKET3_HDR_NET_OFFSET = 26;             // __u16 tp_net
    static final int TPACKET3_HDR_SIZE = 48;
    /** Where the sockaddr_ll of a V3 frame starts: TPACKET_ALIGN(sizeof(struct tpacket3_hdr)). */
    static final int TPACKET3_SOCKADDR_LL_OFFSET = 48;
    /** Room ahead of a V3 frame's data: the header, the sockaddr_ll (20 bytes) and the alignment tp_mac keeps. */
    static final int TPACKET3_HDR_ROOM = 80;

    // ---------------------------------------------------------------------------------------------------------
    // struct tpacket2_hdr (32 bytes), followed by struct sockaddr_ll at TPACKET_ALIGN(32) = 32.
    // On TX the frame data follows at TPACKET2_HDRLEN - sizeof(sockaddr_ll) = 32; on RX at tp_mac.
    // ---------------------------------------------------------------------------------------------------------

    static final int TPACKET2_HDR_STATUS_OFFSET = 0;           // __u32 tp_status
    static final int TPACKET2_HDR_LEN_OFFSET = 4;              // __u32 tp_len (bytes on the wire)
    static final int TPACKET2_HDR_SNAPLEN_OFFSET = 8;          // __u32 tp_snaplen (bytes present in the slot)
    static final int TPACKET2_HDR_MAC_OFFSET = 12;             // __u16 tp_mac (frame start, from the header)
    static final int TPACKET2_HDR_NET_OFFSET = 14;             // __u16 tp_net
    static final int TPACKET2_HDR_SEC_OFFSET = 16;             // __u32 tp_sec
    static final int TPACKET2_HDR_NSEC_OFFSET = 20;            // __u32 tp_nsec
    static final int TPACKET2_HDR_VLAN_TCI_OFFSET = 24;        // __u16 tp_vlan_tci
    static final int TPACKET2_HDR_VLAN_TPID_OFFSET = 26;       // __u16 tp_vlan_tpid
    static final int TPACKET2_HDR_SIZE = 32;                   // + __u8 tp_padding[4]
    /** Where the sockaddr_ll of a V2 frame starts: TPACKET_ALIGN(sizeof(struct tpacket2_hdr)). */
    static final int TPACKET2_SOCKADDR_LL_OFFSET = 32;
    /** TPACKET2_HDRLEN: TPACKET_ALIGN(sizeof(struct tpacket2_hdr)) + sizeof(struct sockaddr_ll). */
    static final int TPACKET2_HDRLEN = 32 + SOCKADDR_LL_SIZE;
    /** Where the kernel reads a TX frame from, without PACKET_TX_HAS_OFF: TPACKET2_HDRLEN - sizeof(sockaddr_ll). */
    static final int TPACKET2_TX_DATA_OFFSET = TPACKET2_HDRLEN - SOCKADDR_LL_SIZE;
    /**
     * Where an Ethernet frame starts in a V2 RX slot (tpacket_rcv for SOCK_RAW, no tp_reserve, no vnet header):
     * the network header goes to TPACKET_ALIGN(TPACKET2_HDRLEN + 16) = 80 and the 14-byte MAC header just before.
     * Only sizes slots; the reader always follows tp_mac.
     */
    static final int TPACKET2_RX_ETHERNET_MAC_OFFSET = 80 - 14;

    // ---------------------------------------------------------------------------------------------------------
    // struct ifreq (40 bytes): char ifr_name[IFNAMSIZ] then a union holding int ifr_mtu
    // ---------------------------------------------------------------------------------------------------------

    static final int IFNAMSIZ = 16;
    static final int IFREQ_MTU_OFFSET = 16;
    /** ifr_hwaddr.sa_data: the hardware address, after the 2-byte sa_family at offset 16. */
    static final int IFREQ_HWADDR_DATA_OFFSET = 18;
    /** Ethernet address length. */
    static final int ETH_ALEN = 6;
    static final int IFREQ_SIZE = 40;

    /** VLAN tag length the kernel allows on top of the MTU for a TX frame. */
    static final int VLAN_HLEN = 4;
    /** Ethernet header length (dev->hard_header_len for Ethernet devices). */
    static final int ETH_HLEN = 14;

    private LinuxPacketAbi()
    {
    }

    /**
     * Hand a filled TPACKET_V2 transmit slot to the kernel: the frame's length, then its status SEND_REQUEST with a
     * release store, since the kernel must see the frame bytes (and the length) before the status.
     *
     * @param slotHeader  offset of the slot (its tpacket2_hdr) in {@code ring}.
     * @param frameLength bytes the kernel sends from the slot's data (a virtio header included where there is one).
     */
    static void requestSend(final UnsafeBuffer ring, final int slotHeader, final int frameLength)
    {
        ring.putInt(slotHeader + TPACKET2_HDR_LEN_OFFSET, frameLength);
        ring.putIntRelease(slotHeader + TPACKET2_HDR_STATUS_OFFSET, TP_STATUS_SEND_REQUEST);
    }

    /**
     * @param value a 16-bit value in host order.
     * @return it in network order (the hosts this runs on are little-endian).
     */
    static int htons(final int value)
    {
        return ((value & 0xFF) << 8) | ((value >>> 8) & 0xFF);
    }
}
