package io.netreduce.host.allreduce;

/**
 * An all-reduce could not complete: a queue pair failed, results stopped arriving within the timeout, or a
 * result did not carry what this worker expected. The message says which, with the counters that explain it.
 * The operation object is unusable afterwards (its connections may hold half-sent messages).
 */
public final class AllReduceException extends RuntimeException
{
    private static final long serialVersionUID = 1L;

    public AllReduceException(final String message)
    {
        super(message);
    }
}
