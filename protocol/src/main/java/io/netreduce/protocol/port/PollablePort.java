package io.netreduce.protocol.port;

/**
 * A port with a socket a {@link PortPoller} can wait on: the AF_PACKET and AF_XDP ports.
 */
interface PollablePort extends PacketPort
{
    /** The descriptor that polls readable when frames wait to be received. */
    int receiveFd();

    /** Whether frames wait in user-space-visible rings already (no system call). */
    boolean hasReceiveWork();

    /** Whether frames are queued for the kernel that it has not taken yet. */
    boolean hasPendingTransmit();

    /**
     * The descriptor that polls writable when the kernel can take pending frames again (an AF_PACKET transmit
     * socket whose buffer had no room for them), or -1 where pending frames need only the next kick.
     */
    int transmitFd();
}
