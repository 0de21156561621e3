package io.netreduce.daemon.ctl;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code ctl captures}, {@code ctl capture start} and {@code ctl capture stop}: pcap captures of a port's
 * received frames or of the frames the dataplane drops, written by the daemon into its capture directory.
 */
final class CtlCaptureCommands
{
    private static final ObjectMapper JSON = new ObjectMapper();

    private CtlCaptureCommands()
    {
    }

    @Command(name = "captures", description = "List running and recently finished captures.")
    static final class Captures extends CtlSubcommands.Base
    {
        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/captures";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            final Table table = new Table("ID", "WHAT", "STATE", "FRAMES", "LOST", "FILE");
            final List<String> errors = new ArrayList<>();
            for (final JsonNode capture : answer)
            {
                final String state = capture.path("running").asBoolean() ? "running" :
                    capture.hasNonNull("error") ? "failed" : "done";
                final long max = capture.path("maxPackets").asLong();
                table.row(capture.path("id").asText(), what(capture), state,
                    capture.path("packets").asLong() + (max > 0 ? "/" + max : ""), capture.path("lost").asLong(),
                    capture.path("file").asText());
                if (capture.hasNonNull("error"))
                {
                    errors.add("capture " + capture.path("id").asText() + ": " + capture.path("error").asText());
                }
            }
            table.print(out);
            errors.forEach(out::println);
        }
    }

    @Command(name = "capture", description = "Start or stop a pcap capture.",
        subcommands = { Start.class, Stop.class })
    static final class Capture implements Runnable
    {
        @Spec
        CommandSpec spec;

        @Override
        public void run()
        {
            spec.commandLine().usage(spec.commandLine().getOut());
        }
    }

    @Command(name = "start",
        description = {
            "Capture every frame received on a port (--port), or every frame the dataplane drops (--drops, " +
                "optionally only those received on --port), to a pcap file in the daemon's capture directory.",
            "A drop capture also writes FILE.reasons: one line per frame with its number, port and drop reason." })
    static final class Start extends CtlSubcommands.Base
    {
        @Option(names = "--port", paramLabel = "PORT", description = "The appliance port (interface name).")
        String port;

        @Option(names = "--drops", description = "Capture dropped frames instead of a port's received frames.")
        boolean drops;

        @Option(names = "--file", required = true, paramLabel = "FILE",
            description = "The pcap file, inside the daemon's capture directory (appliance.captureDirectory); " +
                "a relative path is taken relative to it. It must not exist.")
        String file;

        @Option(names = "--max", paramLabel = "N", defaultValue = "0",
            description = "Stop after N frames (default: no limit).")
        long maxPackets;

        @Override
        String method()
        {
            return "POST";
        }

        @Override
        String path()
        {
            return "/v1/captures";
        }

        @Override
        String body()
        {
            final ObjectNode request = JSON.createObjectNode();
            if (port != null)
            {
                request.put("port", port);
            }
            request.put("drops", drops);
            request.put("file", file);
            request.put("maxPackets", maxPackets);
            return request.toString();
        }

        @Override
        String contentType()
        {
            return "application/json";
        }

        @Override
        void render(final JsonNode capture, final PrintWriter out)
        {
            final long max = capture.path("maxPackets").asLong();
            out.println("capture " + capture.path("id").asText() + " started: " + what(capture) + " -> " +
                capture.path("file").asText() + (max > 0 ? " (at most " + max + " frames)" : ""));
            if (capture.hasNonNull("reasonsFile"))
            {
                out.println("drop reasons -> " + capture.path("reasonsFile").asText());
            }
        }
    }

    @Command(name = "stop", description = "Stop a capture and close its file.")
    static final class Stop extends CtlSubcommands.Base
    {
        @Parameters(paramLabel = "ID", description = "The capture id (see ctl captures).")
        String id;

        @Override
        String method()
        {
            return "DELETE";
        }

        @Override
        String path()
        {
            return "/v1/captures/" + id;
        }

        @Override
        void render(final JsonNode capture, final PrintWriter out)
        {
            out.println("capture " + capture.path("id").asText() + " stopped: " + capture.path("packets").asLong() +
                " frame(s) written to " + capture.path("file").asText() + ", " + capture.path("lost").asLong() +
                " lost");
            if (capture.hasNonNull("error"))
            {
                out.println("error: " + capture.path("error").asText());
            }
        }
    }

    static String what(final JsonNode capture)
    {
        final String port = capture.hasNonNull("port") ? capture.path("port").asText() : null;
        if (capture.path("drops").asBoolean())
        {
            return port == null ? "drops" : "drops on " + port;
        }
        return "port " + port;
    }
}
