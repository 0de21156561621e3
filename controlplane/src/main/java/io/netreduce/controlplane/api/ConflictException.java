package io.netreduce.controlplane.api;

/**
 * The request would duplicate something that exists, e.g. a job name (HTTP 409).
 */
public final class ConflictException extends RuntimeException
{
    /**
     * @param message what conflicts.
     */
    public ConflictException(final String message)
    {
        super(message);
    }
}
