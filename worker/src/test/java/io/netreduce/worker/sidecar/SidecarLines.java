package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.BufferedReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The trainer's side of a sidecar's control socket in tests: one JSON request line out, its reply line back.
 */
final class SidecarLines
{
    /** The trainer's reader of replies: a full ObjectMapper, not the sidecar's own (Requests). */
    static final ObjectMapper JSON = new ObjectMapper();

    private SidecarLines()
    {
    }

    /**
     * Send {@code line} and read the reply on {@code threads}, waiting at most {@code seconds}.
     */
    static JsonNode ask(
        final OutputStream out, final BufferedReader in, final ExecutorService threads, final String line,
        final long seconds) throws Exception
    {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
        final String reply = CompletableFuture.supplyAsync(() ->
        {
            try
            {
                return in.readLine();
            }
            catch (final Exception ex)
            {
                throw new IllegalStateException(ex);
            }
        }, threads).get(seconds, TimeUnit.SECONDS);
        assertThat(reply).isNotNull();
        return JSON.readTree(reply);
    }
}
