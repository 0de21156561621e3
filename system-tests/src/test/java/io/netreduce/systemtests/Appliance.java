package io.netreduce.systemtests;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netreduce.daemon.Daemon;
import io.netreduce.daemon.PacketDataplane;
import io.netreduce.controlplane.config.DataplaneConfig;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.port.NetworkNamespace;

import java.io.IOException;
import java.time.Duration;
import java.util.Map;

/**
 * The netreduce daemon, in this JVM, with its AF_PACKET port opened inside the test bed's appliance namespace
 * ({@link NetworkNamespace#callIn}): the same {@link Daemon}, {@link PacketDataplane} and port set-up as
 * {@code netreduce daemon}, minus a second JVM. The control API listens on loopback in the JVM's own namespace, so
 * tests use it (and its counters) directly.
 */
final class Appliance implements AutoCloseable
{
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Daemon daemon;
    private final PacketDataplane dataplane;
    private final ApiClient api;

    private Appliance(final Daemon daemon, final PacketDataplane dataplane)
    {
        this.daemon = daemon;
        this.dataplane = dataplane;
        this.api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(10), Daemon.apiToken());
    }

    /**
     * @param jobs            the {@code jobs:} section (YAML, indented as a top-level key), or empty.
     * @param dropProbability the dataplane's fault injection (appliance.dataplane.dropProbability).
     */
    static Appliance start(final TestBed bed, final double dropProbability, final String jobs)
    {
        return start(bed.applianceNamespace(), bed.mtu(), null, dropProbability, jobs);
    }

    /**
     * @param ecnBacklog {@code appliance.dataplane.ecnBacklog}: the fraction of its receive ring from which the
     *                   appliance marks ECN itself (0: never).
     */
    static Appliance start(final TestBed bed, final String jobs, final double ecnBacklog)
    {
        return start(bed.applianceNamespace(), bed.mtu(), null, 0.0, jobs, 1, "", ecnBacklog);
    }

    /**
     * @param namespace the namespace whose eth0 is the appliance's port.
     * @param name      {@code appliance.name} (its role in multi-rack rings), or null.
     */
    static Appliance start(
        final String namespace, final int mtu, final String name, final double dropProbability, final String jobs)
    {
        return start(namespace, mtu, name, dropProbability, jobs, 1);
    }

    /**
     * @param lanes {@code appliance.dataplane.lanes}: the port is opened once per lane in the namespace, as a fanout
     *              group.
     */
    static Appliance start(final String namespace, final int mtu, final String name, final double dropProbability,
        final String jobs, final int lanes)
    {
        return start(namespace, mtu, name, dropProbability, jobs, lanes, "", DataplaneConfig.DEFAULT_ECN_BACKLOG);
    }

    /**
     * An appliance that serves SwitchML from the bed's SwitchML address (10.77.0.254, the appliance port's MAC).
     *
     * @param controller {@code appliance.switchml.controller.listen}, or null for none.
     */
    static Appliance startSwitchMl(final TestBed bed, final double dropProbability, final String jobs,
        final String controller)
    {
        final String switchml = """
            switchml:
                mac: "02:77:00:00:00:fe"
                ip: 10.77.0.254
            """ + (controller == null ? "" : """
                controller:
                  listen: %s
                  allow: [10.77.0.0/24, 127.0.0.0/8]
            """.formatted(controller));
        return start(bed.applianceNamespace(), bed.mtu(), null, dropProbability, jobs, 1, switchml,
            DataplaneConfig.DEFAULT_ECN_BACKLOG);
    }

    private static Appliance start(final String namespace, final int mtu, final String name,
        final double dropProbability, final String jobs, final int lanes, final String switchml,
        final double ecnBacklog)
    {
        final String text = """
            appliance:
              %s
              ports:
                - name: eth0
                  mtu: %d
              dataplane:
                lanes: %d
                dropProbability: %s
                dropSeed: 7
                ecnBacklog: %s
              memoryBudget: 512MiB
              api:
                listen: 127.0.0.1:0
                tokenFile: /tmp/netreduce-test-api.token
              metrics:
                listen: 127.0.0.1:0
              logging:
                level: warn
              %s
            %s
            """.formatted(name == null ? "" : "name: " + name, mtu, lanes, Double.toString(dropProbability),
            Double.toString(ecnBacklog), switchml.replace("\n", "\n  ").stripTrailing(), jobs);
        try
        {
            // The interface exists in the appliance namespace, not in the JVM's: only the document is validated here;
            // opening the port in the namespace is the real check.
            final NetreduceConfig config = ConfigLoader.parse(text, ValidationOptions.DOCUMENT_ONLY);
            final PacketDataplane dataplane = new PacketDataplane(
                port -> NetworkNamespace.callIn(namespace, () -> PacketDataplane.openPort(port)),
                (port, count) -> NetworkNamespace.callIn(namespace, () -> PacketDataplane.openLanePorts(port, count)));
            return new Appliance(Daemon.start(config, () -> ConfigLoader.parse(text, ValidationOptions.DOCUMENT_ONLY),
                ValidationOptions.DOCUMENT_ONLY, dataplane), dataplane);
        }
        catch (final io.netreduce.controlplane.config.ConfigException ex)
        {
            throw new IllegalArgumentException("generated configuration refused: " + ex.getMessage() + "\n" + text, ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(ex);
        }
    }

    /**
     * The {@code jobs:} section for one job with one ring over ranks 0..world-1 of the test bed.
     */
    static String ringJob(
        final String name, final int ringId, final String type, final int world, final int window, final int msgLen,
        final int payload)
    {
        final StringBuilder yaml = new StringBuilder("""
            jobs:
              - name: %s
                rings:
                  - id: %d
                    elementType: %s
                    window: %d
                    msgLen: %d
                    payloadSize: %d
                    pmtu: %d
                    members:
            """.formatted(name, ringId, type, window, msgLen, payload, payload));
        for (int r = 0; r < world; r++)
        {
            yaml.append("          - { rank: ").append(r).append(", ip: ")
                .append(TestBed.workerIp(r).getHostAddress()).append(" }\n");
        }
        return yaml.toString();
    }

    /**
     * The {@code jobs:} section for one multi-rack ring over ranks 0..world-1 of a multi-rack bed: {@code racks}
     * racks of consecutive ranks, leaves {@link #leafName leaf-a, leaf-b, ...}, spine {@code spine}.
     */
    static String racksJob(
        final String name, final int ringId, final String type, final int world, final int racks, final int window,
        final int msgLen, final int payload)
    {
        final StringBuilder yaml = new StringBuilder(ringJob(name, ringId, type, world, window, msgLen, payload));
        yaml.append("        spine: spine\n        racks:\n");
        final int per = world / racks;
        for (int k = 0; k < racks; k++)
        {
            yaml.append("          - { leaf: ").append(leafName(k)).append(", ranks: [");
            for (int r = k * per; r < (k + 1) * per; r++)
            {
                yaml.append(r == k * per ? "" : ", ").append(r);
            }
            yaml.append("] }\n");
        }
        return yaml.toString();
    }

    /**
     * The {@code jobs:} section for one job over {@code trees} aggregation trees of ranks 0..world-1 of the bed:
     * ring {@code firstRingId + t} names its appliance {@link #treeName}(t).
     */
    static String treesJob(
        final String name, final int firstRingId, final String type, final int world, final int trees,
        final int window, final int msgLen, final int payload)
    {
        final String first = ringJob(name, firstRingId, type, world, window, msgLen, payload);
        final StringBuilder yaml = new StringBuilder(first.substring(0, first.indexOf("      - id: ")));
        for (int t = 0; t < trees; t++)
        {
            final String ring = ringJob(name, firstRingId + t, type, world, window, msgLen, payload);
            final String idLine = "      - id: " + (firstRingId + t) + "\n";
            yaml.append(ring.substring(ring.indexOf(idLine)).replace(idLine,
                idLine + "        appliance: " + treeName(t) + "\n"));
        }
        return yaml.toString();
    }

    static String treeName(final int tree)
    {
        return "tree-" + (char)('a' + tree);
    }

    static String leafName(final int rack)
    {
        return "leaf-" + (char)('a' + rack);
    }

    /**
     * @return the port the SwitchML controller listens on (in the test's own namespace), or -1 if none.
     */
    int switchMlControllerPort()
    {
        final java.net.InetSocketAddress address = dataplane.switchMlControllerAddress();
        return address == null ? -1 : address.getPort();
    }

    /**
     * One control API request.
     *
     * @throws java.io.UncheckedIOException if the daemon cannot be reached.
     */
    ApiClient.Response request(final String method, final String path, final String body, final String contentType)
    {
        try
        {
            return api.send(method, path, body, contentType);
        }
        catch (final IOException ex)
        {
            throw new java.io.UncheckedIOException(method + " " + path, ex);
        }
    }

    /**
     * @return every counter of {@code GET /v1/counters}, description → value.
     */
    Map<String, Long> counters()
    {
        final ApiClient.Response response = request("GET", "/v1/counters", null, null);
        if (response.status() != 200)
        {
            throw new IllegalStateException("GET /v1/counters: " + response.status() + " " + response.body());
        }
        try
        {
            final Map<String, Long> byDescription = new java.util.LinkedHashMap<>();
            JSON.readTree(response.body()).elements().forEachRemaining(counter ->
                byDescription.put(counter.path("description").asText(), counter.path("value").asLong()));
            return byDescription;
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("counters: " + response.body(), ex);
        }
    }

    /**
     * @return one dataplane counter, as the API reports it (keyed by the counter's label).
     */
    long counter(final DataplaneCounter counter)
    {
        final Map<String, Long> all = counters();
        final Long value = all.get(counter.label());
        if (value == null)
        {
            throw new IllegalArgumentException("no counter '" + counter.label() + "' in " + all.keySet());
        }
        return value;
    }

    @Override
    public void close()
    {
        try
        {
            api.close();
        }
        finally
        {
            daemon.close();
        }
    }
}
