package io.netreduce.daemon;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static io.netreduce.daemon.PacketDataplane.COMMAND_TIMEOUT_MS;

/**
 * The control thread's wait for the dataplane's reply to a command (install, remove, snapshot): bounded by
 * {@link PacketDataplane#COMMAND_TIMEOUT_MS}, and a refusal stays an {@link IllegalArgumentException}, the rest
 * become {@link IllegalStateException}s, each message prefixed with what was asked.
 */
final class CommandReplies
{
    private CommandReplies()
    {
    }

    /**
     * @param reply the dataplane's reply to come.
     * @param what  the command, for the messages: "install ring 3".
     * @return the reply.
     */
    static <T> T await(final CompletableFuture<T> reply, final String what)
    {
        try
        {
            return reply.get(COMMAND_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        }
        catch (final ExecutionException ex)
        {
            final Throwable cause = ex.getCause();
            if (cause instanceof IllegalArgumentException refusal)
            {
                throw new IllegalArgumentException(what + ": " + refusal.getMessage(), refusal);
            }
            throw new IllegalStateException(what + ": " + cause.getMessage(), cause);
        }
        catch (final TimeoutException ex)
        {
            throw new IllegalStateException(what + ": the dataplane did not answer within " + COMMAND_TIMEOUT_MS +
                " ms", ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(what + ": interrupted", ex);
        }
    }
}
