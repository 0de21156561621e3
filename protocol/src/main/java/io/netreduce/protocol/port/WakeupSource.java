package io.netreduce.protocol.port;

/**
 * A descriptor besides the ports that a {@link PortPoller} also waits on, so that work from outside the network
 * (a trainer's request) wakes a blocked loop at once: the socket the requests themselves arrive on
 * ({@link UnixControlSocket}).
 */
public interface WakeupSource
{
    /**
     * @return the descriptor to wait on for reading.
     */
    int fd();

    /**
     * Called by the poller when the descriptor was readable: reset what woke it, if the owner does not consume it
     * itself.
     *
     * @return true if there had been something to reset.
     */
    boolean drain();
}
