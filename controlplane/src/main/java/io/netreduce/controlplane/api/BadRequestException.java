package io.netreduce.controlplane.api;

/**
 * The request is well-formed but asks for something the appliance refuses to do, e.g. a capture file outside
 * the capture directory or a port that does not exist (HTTP 400).
 */
public final class BadRequestException extends RuntimeException
{
    /**
     * @param message why the request is refused.
     */
    public BadRequestException(final String message)
    {
        super(message);
    }
}
