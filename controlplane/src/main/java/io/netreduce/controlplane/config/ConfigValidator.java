package io.netreduce.controlplane.config;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static io.netreduce.controlplane.config.ConfigRules.NAME_RULE;
import static io.netreduce.controlplane.config.ConfigRules.isName;
import static io.netreduce.controlplane.config.ConfigRules.isRingIdValid;
import static io.netreduce.controlplane.config.ErrorCollector.child;
import static io.netreduce.controlplane.config.ErrorCollector.index;

/**
 * Range and cross-field checks of a configuration: addresses, ranks, ring ids, window, MsgLen, payload size,
 * world size, memory budget and (optionally) the host's interfaces. Every error is reported with its path.
 * <p>
 * The appliance section is checked by {@link ApplianceValidator}, each ring by {@link RingValidator}; what spans
 * sections stays here: job names and ring ids unique across jobs, the rings' aggregator memory against the budget,
 * and every ring's PMTU against the ports' MTU. The checks run in a fixed order, since only the first error at a
 * path is kept.
 */
public final class ConfigValidator
{
    private final ErrorCollector errors;
    private final ApplianceValidator appliance;
    private final RingValidator rings;
    private final SwitchMlValidator switchMl;

    ConfigValidator(final ValidationOptions options, final ErrorCollector errors)
    {
        this.errors = errors;
        appliance = new ApplianceValidator(options, errors);
        rings = new RingValidator(errors);
        switchMl = new SwitchMlValidator(errors);
    }

    /**
     * Validate a configuration that was built in memory (e.g. the running one plus a job added over the API).
     *
     * @param config  the configuration.
     * @param options host-dependent checks to run.
     * @return every error found; empty if the configuration is valid.
     */
    public static List<ConfigError> validate(final NetreduceConfig config, final ValidationOptions options)
    {
        final ErrorCollector errors = new ErrorCollector();
        new ConfigValidator(options, errors).check(config);
        return errors.errors();
    }

    void check(final NetreduceConfig config)
    {
        appliance.check(config.appliance(), "appliance");
        switchMl.checkAppliance(config.appliance().switchml(), child("appliance", "switchml"));
        if (config.appliance().switchml() != null && config.appliance().dataplane().lanes() > 1)
        {
            errors.add("appliance.dataplane.lanes", "SwitchML jobs run on one lane: the lanes' steering knows rings " +
                "only (set lanes: 1, or drop appliance.switchml)");
        }
        final Map<java.net.InetAddress, String> switchMlWorkers = new HashMap<>();
        final Map<String, String> jobNames = new HashMap<>();
        final Map<Integer, String> ringIds = new HashMap<>();
        for (int j = 0; j < config.jobs().size(); j++)
        {
            final JobConfig job = config.jobs().get(j);
            final String jobPath = index("jobs", j);
            checkJob(job, jobPath);
            if (job.switchml() != null)
            {
                switchMl.checkJob(job, jobPath, config.appliance(), switchMlWorkers);
            }
            final String namePath = child(jobPath, "name");
            final String previous = jobNames.putIfAbsent(job.name(), namePath);
            if (previous != null)
            {
                errors.add(namePath, "duplicate job name '" + job.name() + "' (also " + previous + ")");
            }
            for (int r = 0; r < job.rings().size(); r++)
            {
                final RingConfig ring = job.rings().get(r);
                final String idPath = child(index(child(jobPath, "rings"), r), "id");
                if (isRingIdValid(ring.id()) && !errors.hasErrorAt(idPath))
                {
                    final String owner = ringIds.putIfAbsent(ring.id(), idPath);
                    if (owner != null)
                    {
                        errors.add(idPath, "ring id " + ring.id() + " is already used by " + owner +
                            " (ring ids are 8 bits on the wire and must be unique across all jobs)");
                    }
                }
            }
        }
        checkMemoryBudget(config);
        checkRingsFitPorts(config);
    }

    /**
     * RoCEv2 headers around a packet's payload: IPv4 20 + UDP 8 + BTH 12 + RETH 16 + ImmDt 4 + ICRC 4 (the IP
     * packet that must fit the port's MTU); IPv6 adds 20.
     */
    static final int ROCE_IPV4_OVERHEAD = 64;
    static final int ROCE_IPV6_OVERHEAD = 84;

    private void checkRingsFitPorts(final NetreduceConfig config)
    {
        int smallest = Integer.MAX_VALUE;
        String smallestPort = null;
        for (final PortConfig port : config.appliance().ports())
        {
            if (port.mtu() < smallest)
            {
                smallest = port.mtu();
                smallestPort = port.name();
            }
        }
        if (smallestPort == null)
        {
            return;
        }
        for (int j = 0; j < config.jobs().size(); j++)
        {
            final JobConfig job = config.jobs().get(j);
            for (int r = 0; r < job.rings().size(); r++)
            {
                final RingConfig ring = job.rings().get(r);
                final boolean ipv6 = !ring.members().isEmpty() && ring.members().getFirst().address() != null &&
                    ring.members().getFirst().address().getAddress().length == 16;
                final int overhead = ipv6 ? ROCE_IPV6_OVERHEAD : ROCE_IPV4_OVERHEAD;
                if (ring.pmtu() + overhead > smallest)
                {
                    errors.add(child(index(child(index("jobs", j), "rings"), r), "pmtu"), "PMTU " + ring.pmtu() +
                        " plus the RoCEv2 headers (" + overhead + " bytes) does not fit the MTU " + smallest +
                        " of port " + smallestPort + ": its frames could not reach the appliance" +
                        largerOnThisHost(config, smallestPort, smallest));
                }
            }
        }
    }

    /**
     * The hint for a ring that does not fit a port whose interface has a larger MTU than the configuration says
     * (most often because {@code mtu} was left at its default, 1500, on a jumbo-frame interface); "" otherwise.
     */
    private String largerOnThisHost(final NetreduceConfig config, final String port, final int configured)
    {
        final Integer actual = appliance.interfaceMtu(port);
        if (actual == null || actual <= configured)
        {
            return "";
        }
        final int index = config.appliance().ports().stream().map(PortConfig::name).toList().indexOf(port);
        return " (the configured MTU: appliance.ports[" + index + "].mtu, " + PortConfig.DEFAULT_MTU +
            " unless set; interface '" + port + "' has " + actual + " on this host: set mtu to " +
            Math.min(actual, PortConfig.MAX_MTU) + ")";
    }

    void checkJob(final JobConfig job, final String path)
    {
        final String namePath = child(path, "name");
        if (!isName(job.name()))
        {
            errors.add(namePath, "job name '" + job.name() + "' " + NAME_RULE);
        }
        final String ringsPath = child(path, "rings");
        if (job.rings().isEmpty() && job.switchml() == null)
        {
            errors.add(ringsPath, "a job needs at least one ring");
        }
        for (int r = 0; r < job.rings().size(); r++)
        {
            rings.check(job.rings().get(r), index(ringsPath, r));
        }
    }

    private void checkMemoryBudget(final NetreduceConfig config)
    {
        long total = 0;
        final List<String> parts = new ArrayList<>();
        for (int j = 0; j < config.jobs().size(); j++)
        {
            final JobConfig job = config.jobs().get(j);
            for (int r = 0; r < job.rings().size(); r++)
            {
                final RingConfig ring = job.rings().get(r);
                // Only the rings this appliance installs use its memory: a topology file also lists the rings
                // of the other racks' leaves, rings whose spine is another appliance, or other appliances' trees.
                if (isSizable(ring) && isServed(ring, config.appliance().name()))
                {
                    final long bytes = ring.aggregatorBytes();
                    total += bytes;
                    parts.add(index(child(index("jobs", j), "rings"), r) + " " + ByteSize.human(bytes));
                }
            }
            if (job.switchml() != null)
            {
                final long bytes = job.switchml().aggregatorBytes();
                total += bytes;
                parts.add(child(index("jobs", j), "switchml") + " " + ByteSize.human(bytes));
            }
        }
        final long budget = config.appliance().memoryBudget();
        if (budget > 0 && total > budget)
        {
            final boolean pools = config.jobs().stream().anyMatch(job -> job.switchml() != null);
            errors.add("appliance.memoryBudget", (pools ? "rings and SwitchML pools" : "rings") + " need " +
                ByteSize.human(total) + " of aggregator memory (" +
                String.join(", ", parts) + "), over the budget of " + ByteSize.human(budget));
        }
    }

    private static boolean isServed(final RingConfig ring, final String applianceName)
    {
        if (ring.racks().isEmpty())
        {
            return ring.appliance() == null || ring.appliance().equals(applianceName);
        }
        return applianceName != null && (applianceName.equals(ring.spine()) ||
            ring.racks().stream().anyMatch(rack -> applianceName.equals(rack.leaf())));
    }

    private static boolean isSizable(final RingConfig ring)
    {
        return ring.window() >= 1 && ring.window() <= RingConfig.MAX_WINDOW &&
            ring.msgLen() >= 1 && ring.msgLen() <= RingConfig.MAX_MSG_LEN &&
            ring.payloadSize() >= 1 && ring.payloadSize() <= RingConfig.PMTUS.getLast();
    }
}
