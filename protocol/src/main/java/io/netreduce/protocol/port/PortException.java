package io.netreduce.protocol.port;

/**
 * A port could not be opened or configured: names the operation, the interface and, for system call failures,
 * the errno and its text.
 */
public final class PortException extends RuntimeException
{
    private static final long serialVersionUID = 1L;

    private final int errno;

    public PortException(final String message)
    {
        super(message);
        this.errno = 0;
    }

    public PortException(final String message, final int errno)
    {
        super(message + ": " + Libc.strerror(errno) + " (errno " + errno + ")");
        this.errno = errno;
    }

    /**
     * @return the errno of the failed system call, 0 when the failure was not a system call's.
     */
    public int errno()
    {
        return errno;
    }
}
