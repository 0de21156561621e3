package io.netreduce.protocol.port;

/**
 * Which XDP hook of the interface the {@link AfXdpPort}'s program is attached to.
 */
public enum XdpAttachMode
{
    /** Native if the driver has an XDP hook, else generic. */
    AUTO,
    /** The driver's own hook (XDP_FLAGS_DRV_MODE), before any socket buffer is built; needed for zero-copy. */
    NATIVE,
    /** The generic hook (XDP_FLAGS_SKB_MODE) in the core receive path, after the socket buffer: any interface. */
    GENERIC
}
