package io.netreduce.switchml.controller;

import java.io.Serial;

/**
 * A session the daemon will not open. The message says why; it is logged and sent to the worker.
 */
public final class SessionRefusedException extends Exception
{
    @Serial
    private static final long serialVersionUID = 1L;

    /**
     * @param message why the session was refused.
     */
    public SessionRefusedException(final String message)
    {
        super(message);
    }
}
