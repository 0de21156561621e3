package io.netreduce.daemon.ctl;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.controlplane.config.ByteSize;
import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.ListenAddress;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * The {@code ctl} subcommands, one small class each.
 */
final class CtlSubcommands
{
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private CtlSubcommands()
    {
    }

    /**
     * Common plumbing: send one request, print errors, print JSON when asked, otherwise hand the answer to
     * {@link #render}.
     */
    abstract static class Base implements Callable<Integer>
    {
        @Spec
        CommandSpec spec;

        /**
         * @return the {@code ctl} command this one runs under, directly or through a group such as {@code capture}.
         */
        CtlCommand ctl()
        {
            CommandSpec at = spec.parent();
            while (!(at.userObject() instanceof CtlCommand))
            {
                at = at.parent();
            }
            return (CtlCommand)at.userObject();
        }

        abstract String method();

        abstract String path();

        String body() throws IOException
        {
            return null;
        }

        String contentType()
        {
            return null;
        }

        abstract void render(JsonNode answer, PrintWriter out);

        @Override
        public Integer call() throws IOException
        {
            final CtlCommand ctl = ctl();
            final PrintWriter out = ctl.spec.commandLine().getOut();
            final PrintWriter err = ctl.spec.commandLine().getErr();
            final ListenAddress address;
            try
            {
                address = ListenAddress.parse(ctl.api);
            }
            catch (final IllegalArgumentException ex)
            {
                err.println("error: --api " + ctl.api + ": " + ex.getMessage());
                err.flush();
                return 2;
            }
            String token = null;
            if (!address.isUnix() && java.nio.file.Files.isReadable(java.nio.file.Path.of(ctl.tokenFile)))
            {
                try
                {
                    token = io.netreduce.controlplane.api.TokenFile.read(java.nio.file.Path.of(ctl.tokenFile));
                }
                catch (final IOException ex)
                {
                    err.println("error: " + ex.getMessage());
                    err.flush();
                    return 2;
                }
            }
            // The request's file is read before the daemon is asked, so that a file that is not there (or not a
            // job) is told as such, not as an API that cannot be reached.
            final String body;
            try
            {
                body = body();
            }
            catch (final IOException ex)
            {
                err.println("error: " + ex.getMessage());
                err.flush();
                return 2;
            }
            final ApiClient.Response response;
            try (ApiClient client = new ApiClient(address, Duration.ofSeconds(ctl.timeoutSeconds), token))
            {
                response = client.send(method(), path(), body, contentType());
            }
            catch (final IOException ex)
            {
                err.println("error: cannot reach the netreduce API at " + address + ": " + ex.getMessage());
                err.flush();
                return CtlCommand.EXIT_UNREACHABLE;
            }
            final JsonNode answer;
            try
            {
                answer = JSON.readTree(response.body());
            }
            catch (final JsonProcessingException ex)
            {
                err.println("error: HTTP " + response.status() + " with a body that is not JSON: " + response.body());
                err.flush();
                return CtlCommand.EXIT_REFUSED;
            }
            if (ctl.json)
            {
                out.println(JSON.writeValueAsString(answer));
                out.flush();
                return response.status() < 300 ? 0 : CtlCommand.EXIT_REFUSED;
            }
            if (response.status() >= 300)
            {
                err.println("error: " + answer.path("error").asText("HTTP " + response.status()));
                for (final JsonNode error : answer.path("errors"))
                {
                    final String path = error.path("path").asText();
                    err.println("  " + (path.isEmpty() ? "" : path + ": ") + error.path("message").asText());
                }
                err.flush();
                return CtlCommand.EXIT_REFUSED;
            }
            render(answer, out);
            out.flush();
            return 0;
        }
    }

    @Command(name = "jobs", description = "List jobs.")
    static final class Jobs extends Base
    {
        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/jobs";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            final Table table = new Table("JOB", "RINGS", "RING IDS", "RANKS");
            for (final JsonNode job : answer)
            {
                final List<String> ids = new ArrayList<>();
                int ranks = 0;
                for (final JsonNode ring : job.path("rings"))
                {
                    ids.add(ring.path("id").asText());
                    ranks += ring.path("members").size();
                }
                final JsonNode switchml = job.path("switchml");
                if (switchml.isObject())
                {
                    // A SwitchML job has no rings: its workers are its ranks (ctl switchml shows its pool).
                    table.row(job.path("name").asText(), "switchml", "-", switchml.path("workers").size());
                    continue;
                }
                table.row(job.path("name").asText(), job.path("rings").size(), String.join(",", ids), ranks);
            }
            table.print(out);
        }
    }

    @Command(name = "job", description = "Show one job: its rings and members.")
    static final class Job extends Base
    {
        @Parameters(paramLabel = "NAME", description = "The job name.")
        String name;

        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/jobs/" + name;
        }

        @Override
        void render(final JsonNode job, final PrintWriter out)
        {
            out.println("job " + job.path("name").asText());
            final Table rings = new Table("RING", "ELEMENT", "WINDOW", "MSGLEN", "PAYLOAD", "PMTU", "RANKS");
            final Table members = new Table("RING", "RANK", "IP", "MAC", "QPN");
            for (final JsonNode ring : job.path("rings"))
            {
                rings.row(ring.path("id").asInt(), ring.path("elementType").asText(), ring.path("window").asInt(),
                    ring.path("msgLen").asInt(), ring.path("payloadSize").asInt(), ring.path("pmtu").asInt(),
                    ring.path("members").size());
                for (final JsonNode member : ring.path("members"))
                {
                    members.row(ring.path("id").asInt(), member.path("rank").asInt(), member.path("ip").asText(),
                        member.has("mac") ? member.path("mac").asText() : null,
                        member.has("qpn") ? member.path("qpn").asInt() : null);
                }
            }
            rings.print(out);
            out.println();
            members.print(out);
        }
    }

    @Command(name = "add-job", description = "Add a job from a YAML or JSON file holding one job {name, rings}.")
    static final class AddJob extends Base
    {
        @Parameters(paramLabel = "FILE", description = "The job file.")
        Path file;

        @Override
        String method()
        {
            return "POST";
        }

        @Override
        String path()
        {
            return "/v1/jobs";
        }

        /**
         * @throws IOException saying which file and why, as the daemon says it of its own configuration
         * ({@link ConfigLoader#readText}): not there or not readable, larger than a configuration may be
         * ({@code /dev/zero} is not read to the end), not UTF-8.
         */
        @Override
        String body() throws IOException
        {
            try
            {
                return ConfigLoader.readText(file, "a job file");
            }
            catch (final ConfigException ex)
            {
                throw new IOException(ex.errors().getFirst().message(), ex);
            }
        }

        @Override
        String contentType()
        {
            return "application/yaml";
        }

        @Override
        void render(final JsonNode job, final PrintWriter out)
        {
            out.println("added job " + job.path("name").asText() + " with " + job.path("rings").size() + " ring(s)");
        }
    }

    @Command(name = "remove-job", description = "Remove a job; its rings' traffic passes through afterwards.")
    static final class RemoveJob extends Base
    {
        @Parameters(paramLabel = "NAME", description = "The job name.")
        String name;

        @Override
        String method()
        {
            return "DELETE";
        }

        @Override
        String path()
        {
            return "/v1/jobs/" + name;
        }

        @Override
        void render(final JsonNode job, final PrintWriter out)
        {
            out.println("removed job " + job.path("name").asText());
        }
    }

    @Command(name = "rings", description = "List rings with their budgeted aggregator memory.")
    static final class Rings extends Base
    {
        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/rings";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            final Table table = new Table("RING", "JOB", "RANKS", "ELEMENT", "WINDOW", "MSGLEN", "PAYLOAD", "MEMORY",
                "LANE");
            for (final JsonNode status : answer)
            {
                final JsonNode ring = status.path("ring");
                final int lane = status.path("lane").asInt(-1);
                table.row(ring.path("id").asInt(), status.path("job").asText(), status.path("worldSize").asInt(),
                    ring.path("elementType").asText(), ring.path("window").asInt(), ring.path("msgLen").asInt(),
                    ring.path("payloadSize").asInt(), ByteSize.human(status.path("aggregatorBytes").asLong()),
                    lane < 0 ? "-" : Integer.toString(lane));
            }
            table.print(out);
        }
    }

    @Command(name = "counters", description = "Show every counter.")
    static final class Counters extends Base
    {
        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/counters";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            // The API keys counters by Prometheus series (for scripts: ctl --json); people read the description.
            final List<JsonNode> counters = new ArrayList<>();
            answer.elements().forEachRemaining(counters::add);
            counters.sort(java.util.Comparator.comparing(counter -> counter.path("description").asText()));
            final Table table = new Table("COUNTER", "VALUE");
            counters.forEach(counter -> table.row(counter.path("description").asText(),
                counter.path("value").asLong()));
            table.print(out);
        }
    }

    @Command(name = "clt", description = "Dump the connection lookup table.")
    static final class Clt extends Base
    {
        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/tables/clt";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            final Table table = new Table("SRC", "DST", "DST QPN", "RING", "RANK", "MSGID", "PSN0");
            for (final JsonNode entry : answer)
            {
                table.row(entry.path("srcIp").asText(), entry.path("dstIp").asText(),
                    String.format(Locale.ROOT, "0x%06x", entry.path("dstQpn").asInt()), entry.path("ringId").asInt(),
                    entry.path("rank").asInt(), entry.path("msgId").asInt(), entry.path("psn0").asLong());
            }
            table.print(out);
        }
    }

    @Command(name = "ctt",
        description = "Dump the connection translation table: the virtual switch-to-switch connections of the " +
            "multi-rack rings this appliance serves.")
    static final class Ctt extends Base
    {
        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/tables/ctt";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            final Table table = new Table("RING", "TIER", "RACK", "ROLE", "CONNECTION", "POPULATED", "DST QPN",
                "MSGID", "PSN0", "TRIGGERS", "LEAVES ON");
            for (final JsonNode entry : answer)
            {
                final boolean learned = entry.path("learned").asBoolean();
                table.row(entry.path("ringId").asInt(), entry.path("tier").asText(), entry.path("rack").asInt(),
                    entry.path("role").asText(), connection(entry.path("connection")),
                    entry.path("populated").asText(),
                    learned ? String.format(Locale.ROOT, "0x%06x", entry.path("dstQpn").asInt()) : "not yet",
                    learned ? entry.path("msgId").asText() : "-", learned ? entry.path("psn0").asText() : "-",
                    ranks(entry.path("triggers")), ranks(entry.path("leaves")));
            }
            table.print(out);
        }

        private static String connection(final JsonNode connection)
        {
            return connection.path("rank").asInt() + " " + connection.path("srcIp").asText() + "->" +
                connection.path("dstIp").asText();
        }

        /** Connections by their sending rank: r stands for r -> r+1. */
        private static String ranks(final JsonNode connections)
        {
            final List<String> ranks = new ArrayList<>();
            connections.forEach(connection -> ranks.add(connection.path("rank").asText()));
            return String.join(",", ranks);
        }
    }

    @Command(name = "occupancy",
        description = "Why is it stuck: the ring's oldest incomplete aggregators and the ranks they wait for.")
    static final class Occupancy extends Base
    {
        @Parameters(paramLabel = "RING", description = "The ring id.")
        int ring;

        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/rings/" + ring + "/occupancy";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            final JsonNode incomplete = answer.path("incomplete");
            out.println("ring " + answer.path("ringId").asInt() + ", " + answer.path("worldSize").asInt() +
                " ranks, " + incomplete.size() + " incomplete aggregator(s)");
            final Table table = new Table("MSGID", "PACKET", "AGE", "ARRIVED", "MISSING");
            for (final JsonNode aggregator : incomplete)
            {
                table.row(aggregator.path("msgId").asInt(), aggregator.path("packetIndex").asInt(),
                    nanos(aggregator.path("ageNanos").asLong()), ranks(aggregator.path("arrivedRanks")),
                    ranks(aggregator.path("missingRanks")));
            }
            table.print(out);
        }
    }

    @Command(name = "latency", description = "Show latency percentiles.")
    static final class Latency extends Base
    {
        @Override
        String method()
        {
            return "GET";
        }

        @Override
        String path()
        {
            return "/v1/latency";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            final Table table = new Table("NAME", "JOB", "RING", "COUNT", "P50", "P90", "P99", "P99.9", "MAX");
            for (final JsonNode summary : answer)
            {
                final int ring = summary.path("ringId").asInt(-1);
                table.row(summary.path("name").asText(), summary.has("job") ? summary.path("job").asText() : null,
                    ring < 0 ? null : ring, summary.path("count").asLong(), nanos(summary.path("p50").asLong()),
                    nanos(summary.path("p90").asLong()), nanos(summary.path("p99").asLong()),
                    nanos(summary.path("p999").asLong()), nanos(summary.path("max").asLong()));
            }
            table.print(out);
        }
    }

    @Command(name = "reload", description = "Reload the daemon's configuration file and apply the difference.")
    static final class Reload extends Base
    {
        @Override
        String method()
        {
            return "POST";
        }

        @Override
        String path()
        {
            return "/v1/reload";
        }

        @Override
        void render(final JsonNode answer, final PrintWriter out)
        {
            for (final Map.Entry<String, String> part : List.of(
                Map.entry("jobsAdded", "jobs added"), Map.entry("jobsRemoved", "jobs removed"),
                Map.entry("ringsAdded", "rings added"), Map.entry("ringsRemoved", "rings removed"),
                Map.entry("ringsChanged", "rings changed"), Map.entry("ringsUnchanged", "rings unchanged")))
            {
                out.println(part.getValue() + ": " + list(answer.path(part.getKey())));
            }
            if (answer.path("restartRequired").asBoolean())
            {
                out.println("note: the appliance section changed; restart the daemon for it to take effect");
            }
        }
    }

    static String list(final JsonNode array)
    {
        if (array.isEmpty())
        {
            return "none";
        }
        final List<String> items = new ArrayList<>();
        final Iterator<JsonNode> elements = array.elements();
        elements.forEachRemaining(node -> items.add(node.asText()));
        return String.join(" ", items);
    }

    static String ranks(final JsonNode array)
    {
        return array.isEmpty() ? "none" : list(array).replace(' ', ',');
    }

    /**
     * @param nanos a duration in nanoseconds.
     * @return the duration in the largest unit that keeps three significant figures, e.g. {@code 12.3us}.
     */
    static String nanos(final long nanos)
    {
        if (nanos < 1_000)
        {
            return nanos + "ns";
        }
        if (nanos < 1_000_000)
        {
            return String.format(Locale.ROOT, "%.1fus", nanos / 1e3);
        }
        if (nanos < 1_000_000_000)
        {
            return String.format(Locale.ROOT, "%.1fms", nanos / 1e6);
        }
        return String.format(Locale.ROOT, "%.2fs", nanos / 1e9);
    }
}
