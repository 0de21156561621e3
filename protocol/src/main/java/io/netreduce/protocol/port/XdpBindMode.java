package io.netreduce.protocol.port;

/**
 * How an {@link AfXdpPort}'s socket moves frames between the driver and the UMEM.
 */
public enum XdpBindMode
{
    /** Zero-copy where the driver offers it, else copy: the kernel's own choice, reported once bound. */
    AUTO,
    /** The kernel copies each frame between its buffers and the UMEM: works on every interface (veth, loopback). */
    COPY,
    /** The driver receives into and sends from the UMEM itself; opening fails where the driver cannot. */
    ZERO_COPY
}
