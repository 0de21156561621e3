package io.netreduce.daemon.ctl;

import com.fasterxml.jackson.databind.JsonNode;
import picocli.CommandLine.Command;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code ctl switchml}: the SwitchML jobs, from the configuration and opened through the controller, with what their
 * pools have done.
 */
@Command(name = "switchml",
    description = "List the SwitchML jobs: workers, pool, slot sets in flight, completions, results resent, drops.")
final class CtlSwitchMlCommand extends CtlSubcommands.Base
{
    @Override
    String method()
    {
        return "GET";
    }

    @Override
    String path()
    {
        return "/v1/switchml";
    }

    @Override
    void render(final JsonNode answer, final PrintWriter out)
    {
        if (answer.isEmpty())
        {
            out.println("no SwitchML jobs");
            return;
        }
        final Table table = new Table("JOB", "ID", "ORIGIN", "WORKERS", "ELEMENTS", "POOL", "IN FLIGHT", "PACKETS",
            "COMPLETIONS", "RESENT", "DROPS (pending/not member/size/pool)");
        for (final JsonNode job : answer)
        {
            final List<String> workers = new ArrayList<>();
            job.path("workers").forEach(worker -> workers.add(worker.asText()));
            table.row(job.path("name").asText(), job.path("id").asInt(), job.path("origin").asText(),
                String.join(",", workers), job.path("elementsPerPacket").asInt(), job.path("poolSize").asInt(),
                job.path("setsInFlight").asInt(), job.path("packets").asLong(), job.path("completions").asLong(),
                job.path("resultsResent").asLong(), job.path("pendingDrops").asLong() + "/" +
                    job.path("notMemberDrops").asLong() + "/" + job.path("wrongSizeDrops").asLong() + "/" +
                    job.path("badPoolIndexDrops").asLong());
        }
        table.print(out);
    }
}
