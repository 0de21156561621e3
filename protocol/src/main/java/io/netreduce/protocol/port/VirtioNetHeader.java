package io.netreduce.protocol.port;

/**
 * {@code struct virtio_net_hdr} (10 bytes, little-endian on x86), which an AF_PACKET socket with PACKET_VNET_HDR
 * puts in front of every frame it sends or receives: it describes a segmentation offload (GSO) frame, one frame
 * on the host that stands for several on the wire, and a checksum left for offload.
 */
final class VirtioNetHeader
{
    /** sizeof(struct virtio_net_hdr): the length PACKET_VNET_HDR prepends. */
    static final int LENGTH = 10;

    static final int FLAGS_OFFSET = 0;        // __u8 flags
    static final int GSO_TYPE_OFFSET = 1;     // __u8 gso_type
    static final int HDR_LEN_OFFSET = 2;      // __virtio16 hdr_len: bytes of headers copied onto every segment
    static final int GSO_SIZE_OFFSET = 4;     // __virtio16 gso_size: payload bytes per segment (not the last)
    static final int CSUM_START_OFFSET = 6;   // __virtio16 csum_start: where the checksummed L4 data starts
    static final int CSUM_OFFSET_OFFSET = 8;  // __virtio16 csum_offset: the checksum field from csum_start

    /** VIRTIO_NET_HDR_F_NEEDS_CSUM: the L4 checksum field holds the pseudo-header sum; finish it per segment. */
    static final int F_NEEDS_CSUM = 1;
    static final int GSO_NONE = 0;
    /** VIRTIO_NET_HDR_GSO_UDP_L4: UDP segmentation (USO), each segment a whole datagram. */
    static final int GSO_UDP_L4 = 5;
    /** VIRTIO_NET_HDR_GSO_ECN: flag bit on gso_type. */
    static final int GSO_ECN = 0x80;

    private VirtioNetHeader()
    {
    }
}
