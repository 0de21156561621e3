package io.netreduce.switchml.controller;

import java.io.Serial;
import java.util.Objects;

/**
 * Thrown by {@link SwitchMlControllerClient} when the controller refused a session: wraps the
 * {@link SessionRefusedException} whose message is the controller's reason, as {@link java.io.UncheckedIOException}
 * wraps an {@link java.io.IOException}.
 */
public final class UncheckedSessionRefusedException extends RuntimeException
{
    @Serial
    private static final long serialVersionUID = 1L;

    /**
     * @param cause the refusal, with the controller's reason as its message.
     */
    public UncheckedSessionRefusedException(final SessionRefusedException cause)
    {
        super(Objects.requireNonNull(cause, "cause").getMessage(), cause);
    }

    @Override
    public synchronized SessionRefusedException getCause()
    {
        return (SessionRefusedException)super.getCause();
    }
}
