package io.netreduce.controlplane.api;

/**
 * The job, ring or capture a request names does not exist (HTTP 404).
 */
public final class NotFoundException extends RuntimeException
{
    /**
     * @param message what was not found, e.g. {@code no job 'bert'}.
     */
    public NotFoundException(final String message)
    {
        super(message);
    }
}
