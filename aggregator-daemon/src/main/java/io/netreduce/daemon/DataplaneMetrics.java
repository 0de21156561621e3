package io.netreduce.daemon;

import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.CounterValue;
import io.netreduce.controlplane.api.CttEntry;
import io.netreduce.controlplane.api.SwitchMlJobStatus;
import io.netreduce.controlplane.metrics.MetricsSink;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.counters.RingCounter;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortCounters;
import org.HdrHistogram.Histogram;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The dataplane's counters, one catalogue for both /metrics and the API (the same names in both places), its
 * latency histogram and the CTT gauges, read at scrape time; and each port's losses for the drop watcher.
 */
final class DataplaneMetrics
{
    /** Latency histogram bucket bounds exported to Prometheus, in seconds. */
    private static final double[] LATENCY_BOUNDS_SECONDS = {
        1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1.0, Double.POSITIVE_INFINITY };

    /** The dataplane's one logger, as before its parts had classes of their own: operators grep its name. */
    private static final Logger LOG = LoggerFactory.getLogger(PacketDataplane.class);

    private final LaneRunners lanes;
    private final DataplaneRingInstaller installer;
    private final DataplaneViews tables;
    private final DataplaneSwitchMl switchMl;
    /** The configuration side, for the CTT metrics (set when the daemon asks for the API's control). */
    private volatile ConfiguredAppliance configured;

    DataplaneMetrics(
        final LaneRunners lanes, final DataplaneRingInstaller installer, final DataplaneViews tables,
        final DataplaneSwitchMl switchMl)
    {
        this.lanes = lanes;
        this.installer = installer;
        this.tables = tables;
        this.switchMl = switchMl;
    }

    void configured(final ConfiguredAppliance configured)
    {
        this.configured = configured;
    }

    /**
     * @return every counter, named as exported.
     * @throws IllegalStateException if the dataplane has not started.
     */
    List<CounterValue> counters()
    {
        return counterSamples().stream().map(CounterSample::counter).toList();
    }

    /**
     * Write every counter, the latency histogram and the CTT gauges to {@code sink}; nothing before the start.
     */
    void collect(final MetricsSink sink)
    {
        if (!lanes.isStarted())
        {
            return;
        }
        // One catalogue of counters for both /metrics and the API: the same names in both places.
        for (final CounterSample sample : counterSamples())
        {
            final CounterValue counter = sample.counter();
            final String[] labels = new String[2 * counter.labels().size()];
            int i = 0;
            for (final Map.Entry<String, String> label : counter.labels().entrySet())
            {
                labels[i++] = label.getKey();
                labels[i++] = label.getValue();
            }
            sink.counter(counter.metric(), sample.help(), counter.value(), labels);
        }
        final Histogram latency = lanes.proxy().latency();
        final long[] buckets = new long[LATENCY_BOUNDS_SECONDS.length];
        for (final var value : latency.recordedValues())
        {
            final double seconds = value.getValueIteratedTo() / 1e9;
            int bucket = 0;
            while (seconds > LATENCY_BOUNDS_SECONDS[bucket])
            {
                bucket++;
            }
            buckets[bucket] += value.getCountAtValueIteratedTo();
        }
        final double sum = latency.getMean() * latency.getTotalCount() / 1e9;
        sink.histogram("netreduce_aggregation_latency_seconds",
            "Time from an aggregator's first packet in to its results out.", LATENCY_BOUNDS_SECONDS, buckets, sum);
        collectCtt(sink);
        collectSwitchMl(sink);
    }

    /**
     * Per SwitchML job (label {@code job}, its name): what its pool did, and the slot sets in flight. Only taken when
     * a job is installed, so an appliance without SwitchML costs no snapshot.
     */
    private void collectSwitchMl(final MetricsSink sink)
    {
        if (switchMl.installed().isEmpty())
        {
            return;
        }
        final List<SwitchMlJobStatus> jobs;
        try
        {
            jobs = switchMl.statuses();
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("SwitchML metrics skipped this scrape: {}", ex.getMessage());
            return;
        }
        for (final SwitchMlJobStatus job : jobs)
        {
            final String[] labels = { "job", job.name() };
            sink.gauge("netreduce_switchml_sets_in_flight",
                "Per SwitchML job: slot sets holding some but not all contributions.", job.setsInFlight(), labels);
            sink.counter("netreduce_switchml_packets", "Per SwitchML job: worker packets added to a slot.",
                job.packets(), labels);
            sink.counter("netreduce_switchml_completions", "Per SwitchML job: slot sets completed.",
                job.completions(), labels);
            sink.counter("netreduce_switchml_results_resent",
                "Per SwitchML job: retransmissions answered with a stored result.", job.resultsResent(), labels);
            final String help = "Per SwitchML job: packets dropped, by reason.";
            sink.counter("netreduce_switchml_drops", help, job.pendingDrops(), "job", job.name(), "reason", "pending");
            sink.counter("netreduce_switchml_drops", help, job.notMemberDrops(), "job", job.name(), "reason",
                "not_member");
            sink.counter("netreduce_switchml_drops", help, job.wrongSizeDrops(), "job", job.name(), "reason",
                "wrong_size");
            sink.counter("netreduce_switchml_drops", help, job.badPoolIndexDrops(), "job", job.name(), "reason",
                "bad_pool_index");
        }
    }

    /**
     * CTT entries per ring and role, and how many of them the CLT has learned, for the rings this appliance serves
     * in a hierarchy. Only taken when such a ring is installed, so a flat appliance's scrape costs no snapshot.
     */
    private void collectCtt(final MetricsSink sink)
    {
        final ConfiguredAppliance configured = this.configured;
        if (installer.installed().stream().allMatch(ring -> ring.hierarchy().tier() == Hierarchy.Tier.FLAT) ||
            configured == null)
        {
            return;
        }
        final List<CttEntry> entries;
        try
        {
            entries = tables.ctt(configured.rings());
        }
        catch (final RuntimeException ex)
        {
            // A dataplane too busy to answer the snapshot in time must not fail the whole scrape.
            LOG.warn("CTT metrics skipped this scrape: {}", ex.getMessage());
            return;
        }
        final Map<List<String>, long[]> counts = new LinkedHashMap<>();
        for (final CttEntry entry : entries)
        {
            final long[] count = counts.computeIfAbsent(
                List.of(entry.job(), Integer.toString(entry.ringId()), entry.tier(), entry.role()), key -> new long[2]);
            count[0]++;
            count[1] += entry.learned() ? 1 : 0;
        }
        for (final Map.Entry<List<String>, long[]> count : counts.entrySet())
        {
            final List<String> key = count.getKey();
            final String[] labels = { "job", key.get(0), "ring", key.get(1), "tier", key.get(2), "role", key.get(3) };
            sink.gauge("netreduce_ctt_entries", "Connection translation table entries of the multi-rack rings.",
                count.getValue()[0], labels);
            sink.gauge("netreduce_ctt_entries_learned",
                "CTT entries whose connection the CLT has learned (QPN and PSN known).", count.getValue()[1], labels);
        }
    }

    /**
     * A counter and the help line of its Prometheus metric (one per metric name, shared by its series).
     */
    private record CounterSample(CounterValue counter, String help)
    {
    }

    /**
     * Every counter of the dataplane, its rings and its ports, named as exported: dataplane counters as
     * {@code netreduce_dataplane_<what>} (drops as {@code netreduce_dataplane_drops{reason}}), per-ring counters as
     * {@code netreduce_ring_<kind>{job,ring}}, port counters as {@code netreduce_port_<name>{port}}.
     */
    private List<CounterSample> counterSamples()
    {
        final DataplaneProxy proxy = lanes.proxy();
        final List<CounterSample> samples = new ArrayList<>();
        for (final DataplaneCounter counter : DataplaneCounter.values())
        {
            final long value = proxy.counter(counter);
            if (counter.isDrop())
            {
                samples.add(new CounterSample(new CounterValue("netreduce_dataplane_drops",
                    Map.of("reason", counter.reason()), counter.label(), value),
                    "Frames the dataplane dropped, by reason."));
            }
            else
            {
                samples.add(new CounterSample(new CounterValue("netreduce_dataplane_" + counter.reason(), Map.of(),
                    counter.label(), value), capitalise(counter.label()) + "."));
            }
        }
        // A ring's counters live in its lane's buffers: every lane's are read.
        for (final DataplaneCounters counters : proxy.laneCounters())
        {
            counters.reader().forEach((counterId, typeId, keyBuffer, label) ->
            {
                if (typeId == DataplaneCounters.RING_COUNTER_TYPE_ID)
                {
                    final int ringId = keyBuffer.getInt(RingCounter.RING_ID_KEY_OFFSET);
                    final RingCounter kind = RingCounter.of(keyBuffer.getInt(RingCounter.KIND_KEY_OFFSET));
                    samples.add(new CounterSample(new CounterValue("netreduce_ring_" + kind.key(),
                        Map.of("job", installer.jobOf(ringId), "ring", Integer.toString(ringId)),
                        "ring " + ringId + " " + kind.what(), counters.reader().getCounterValue(counterId)),
                        "Per ring: " + kind.what() + "."));
                }
            });
        }
        // With lanes a port is one socket per lane, each with its counters: one series per lane (label lane), so an
        // operator sees how the kernel spread the traffic; sum by port for the port's total.
        final List<List<PacketPort>> lanePorts = lanes.lanePorts();
        final boolean perLane = lanePorts.size() > 1;
        for (int lane = 0; lane < lanePorts.size(); lane++)
        {
            for (final PacketPort port : lanePorts.get(lane))
            {
                final Map<String, String> labels = perLane ?
                    Map.of("port", port.name(), "lane", Integer.toString(lane)) : Map.of("port", port.name());
                final String what = "port " + port.name() + (perLane ? " lane " + lane : "");
                for (int id = 0; id < PortCounters.COUNTER_COUNT; id++)
                {
                    samples.add(new CounterSample(new CounterValue("netreduce_port_" + PortCounters.name(id),
                        labels, what + " " + PortCounters.name(id), port.counters().get(id)),
                        "Port counter " + PortCounters.name(id) + (perLane ? ", per lane socket." : ".")));
                }
            }
        }
        return samples;
    }

    /**
     * Each port's (each lane socket's) own losses, for the drop watcher: the kernel found the receive ring full,
     * a frame was longer than a receive slot, an offload frame could not be split.
     */
    List<DropBurstWatcher.PortDrop> portDrops()
    {
        final List<List<PacketPort>> lanePorts = lanes.lanePorts();
        final List<DropBurstWatcher.PortDrop> drops = new ArrayList<>();
        final boolean perLane = lanePorts.size() > 1;
        for (int lane = 0; lane < lanePorts.size(); lane++)
        {
            for (final PacketPort port : lanePorts.get(lane))
            {
                final String where = port.name() + (perLane ? " lane " + lane : "");
                final PortCounters counters = port.counters();
                drops.add(portDrop(where, counters, PortCounters.RX_DROPPED, "receive ring full"));
                drops.add(portDrop(where, counters, PortCounters.RX_TRUNCATED, "frame longer than a receive slot"));
                drops.add(portDrop(where, counters, PortCounters.RX_GSO_UNSUPPORTED, "offload frame not split"));
            }
        }
        return drops;
    }

    private static DropBurstWatcher.PortDrop portDrop(
        final String where, final PortCounters counters, final int id, final String meaning)
    {
        return new DropBurstWatcher.PortDrop(where + " " + PortCounters.name(id) + " (" + meaning + ")",
            () -> counters.get(id));
    }

    private static String capitalise(final String text)
    {
        return text.isEmpty() ? text : Character.toUpperCase(text.charAt(0)) + text.substring(1);
    }
}
