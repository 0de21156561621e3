package io.netreduce.controlplane.config;

import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.ThreadNice;

import java.net.InetAddress;
import java.io.IOException;
import java.net.NetworkInterface;
import java.nio.file.Files;
import java.nio.file.Path;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Pattern;

import static io.netreduce.controlplane.config.ErrorCollector.child;
import static io.netreduce.controlplane.config.ErrorCollector.index;

/**
 * Range and cross-field checks of a configuration: addresses, ranks, ring ids, window, MsgLen, payload size,
 * world size, memory budget and (optionally) the host's interfaces. Every error is reported with its path.
 */
public final class ConfigValidator
{
    /** Job names appear in API paths and metric labels, so they are kept to a URL- and label-safe alphabet. */
    private static final Pattern JOB_NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.-]{0,63}");
    /** What a job or appliance name may be, for the error messages. */
    static final String NAME_RULE =
        "must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit";
    /** Linux interface names are at most IFNAMSIZ - 1 = 15 bytes. */
    private static final int MAX_INTERFACE_NAME = 15;

    private final ValidationOptions options;
    private final ErrorCollector errors;

    ConfigValidator(final ValidationOptions options, final ErrorCollector errors)
    {
        this.options = options;
        this.errors = errors;
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
        checkAppliance(config.appliance(), "appliance");
        final Map<String, String> jobNames = new HashMap<>();
        final Map<Integer, String> ringIds = new HashMap<>();
        for (int j = 0; j < config.jobs().size(); j++)
        {
            final JobConfig job = config.jobs().get(j);
            final String jobPath = index("jobs", j);
            checkJob(job, jobPath);
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
                        " of port " + smallestPort + ": its frames could not reach the appliance");
                }
            }
        }
    }

    void checkJob(final JobConfig job, final String path)
    {
        final String namePath = child(path, "name");
        if (!JOB_NAME.matcher(job.name()).matches())
        {
            errors.add(namePath, "job name '" + job.name() + "' " + NAME_RULE);
        }
        final String ringsPath = child(path, "rings");
        if (job.rings().isEmpty())
        {
            errors.add(ringsPath, "a job needs at least one ring");
        }
        for (int r = 0; r < job.rings().size(); r++)
        {
            checkRing(job.rings().get(r), index(ringsPath, r));
        }
    }

    private void checkAppliance(final ApplianceConfig appliance, final String path)
    {
        final String portsPath = child(path, "ports");
        if (appliance.ports().isEmpty())
        {
            errors.add(portsPath, "the appliance needs at least one port");
        }
        final Map<String, String> names = new HashMap<>();
        for (int i = 0; i < appliance.ports().size(); i++)
        {
            final PortConfig port = appliance.ports().get(i);
            final String portPath = index(portsPath, i);
            final String namePath = child(portPath, "name");
            if (port.name().isEmpty() || port.name().length() > MAX_INTERFACE_NAME ||
                port.name().contains("/") || port.name().chars().anyMatch(Character::isWhitespace))
            {
                errors.add(namePath, "'" + port.name() + "' is not a valid interface name");
            }
            else
            {
                final String previous = names.putIfAbsent(port.name(), namePath);
                if (previous != null)
                {
                    errors.add(namePath, "duplicate port '" + port.name() + "' (also " + previous + ")");
                }
                else if (options.checkInterfaces())
                {
                    checkInterfaceExists(port.name(), namePath);
                }
            }
            if (port.mtu() < PortConfig.MIN_MTU || port.mtu() > PortConfig.MAX_MTU)
            {
                errors.add(child(portPath, "mtu"),
                    "MTU " + port.mtu() + " is not in " + PortConfig.MIN_MTU + ".." + PortConfig.MAX_MTU);
            }
            if (port.segmentationOffload() && port.type() != PortType.AF_PACKET)
            {
                errors.add(child(portPath, "segmentation_offload"), "segmentation offload needs an af_packet " +
                    "port (PACKET_VNET_HDR), but port '" + port.name() + "' is " + port.type().configName());
            }
        }

        final DataplaneConfig dataplane = appliance.dataplane();
        final String dataplanePath = child(path, "dataplane");
        range(dataplane.batchSize(), 1, DataplaneConfig.MAX_BATCH_SIZE, child(dataplanePath, "batchSize"));
        range(dataplane.lanes(), 1, DataplaneConfig.MAX_LANES, child(dataplanePath, "lanes"));
        range(dataplane.laneNice(), ThreadNice.MIN_NICE, ThreadNice.MAX_NICE, child(dataplanePath, "laneNice"));
        if (dataplane.lanes() > 1)
        {
            for (final PortConfig port : appliance.ports())
            {
                if (port.type() != PortType.AF_PACKET)
                {
                    errors.add(child(dataplanePath, "lanes"), dataplane.lanes() + " lanes need af_packet ports (the " +
                        "kernel steers frames to lanes with an AF_PACKET fanout group), but port '" + port.name() +
                        "' is " + port.type().configName());
                }
            }
        }
        final int capacity = dataplane.commandQueueCapacity();
        final String capacityPath = child(dataplanePath, "commandQueueCapacity");
        if (capacity < 2 || capacity > DataplaneConfig.MAX_COMMAND_QUEUE_CAPACITY || Integer.bitCount(capacity) != 1)
        {
            errors.add(capacityPath, capacity + " is not a power of two in 2.." +
                DataplaneConfig.MAX_COMMAND_QUEUE_CAPACITY);
        }

        if (!(dataplane.dropProbability() >= 0.0 && dataplane.dropProbability() < 1.0))
        {
            errors.add(child(dataplanePath, "dropProbability"), dataplane.dropProbability() + " is not in [0, 1)");
        }

        if (appliance.memoryBudget() <= 0)
        {
            errors.add(child(path, "memoryBudget"), "must be greater than zero");
        }
        if (appliance.name() != null && !JOB_NAME.matcher(appliance.name()).matches())
        {
            errors.add(child(path, "name"), "appliance name '" + appliance.name() + "' " + NAME_RULE);
        }
        checkCaptureDirectory(appliance.captureDirectory(), child(path, "captureDirectory"));
        checkApiAccess(appliance, child(path, "api"));
        if (options.checkInterfaces())
        {
            checkUnixSocketPath(appliance.api(), child(child(path, "api"), "listen"));
            checkUnixSocketPath(appliance.metrics(), child(child(path, "metrics"), "listen"));
        }
        if (appliance.api().equals(appliance.metrics()) &&
            (appliance.api().isUnix() || appliance.api().port() != 0))
        {
            errors.add(child(path, "metrics.listen"), "same address as appliance.api.listen (" +
                appliance.api() + ")");
        }
    }

    /** Directories a capture directory must not be: an API client could write pcap files over their content. */
    private static final java.util.Set<String> SYSTEM_DIRECTORIES = java.util.Set.of("/bin", "/boot", "/dev", "/etc",
        "/home", "/lib", "/lib64", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
        "/var", "/var/lib", "/var/log", "/var/run");

    private void checkCaptureDirectory(final String directory, final String path)
    {
        try
        {
            final java.nio.file.Path dir = java.nio.file.Path.of(directory).normalize();
            if (!dir.isAbsolute())
            {
                errors.add(path, "'" + directory + "' is not an absolute path");
            }
            else if (dir.getNameCount() == 0 || SYSTEM_DIRECTORIES.contains(dir.toString()))
            {
                errors.add(path, "'" + directory + "' is a system directory: captures requested through the API " +
                    "could be written over its files; use a directory of its own, e.g. " +
                    ApplianceConfig.DEFAULT_CAPTURE_DIRECTORY);
            }
        }
        catch (final java.nio.file.InvalidPathException ex)
        {
            errors.add(path, "'" + directory + "' is not a valid path: " + ex.getReason());
        }
    }

    /**
     * On TCP the API needs a bearer token (any local user can open a TCP port; a Unix socket is guarded by its
     * file mode), and the token must come from a file the daemon reads (absolute path).
     */
    private void checkApiAccess(final ApplianceConfig appliance, final String path)
    {
        final ListenAddress api = appliance.api();
        final String tokenPath = child(path, "tokenFile");
        if (api != null && !api.isUnix() && appliance.apiTokenFile() == null)
        {
            errors.add(child(path, "listen"), "the API on TCP (" + api + ") needs appliance.api.tokenFile: any local " +
                "user can open a TCP port" + (isLoopback(api) ? "" : ", and this one is not on loopback") +
                "; or listen on a Unix socket (the default)");
        }
        if (appliance.apiTokenFile() != null && !Path.of(appliance.apiTokenFile()).isAbsolute())
        {
            errors.add(tokenPath, "'" + appliance.apiTokenFile() + "' is not an absolute path");
        }
    }

    private static boolean isLoopback(final ListenAddress address)
    {
        try
        {
            return java.net.InetAddress.getByName(address.host()).isLoopbackAddress();
        }
        catch (final java.net.UnknownHostException ex)
        {
            return false;
        }
    }

    /**
     * What binding a Unix socket would find (with {@code --check} and at start): its directory must exist, and
     * whatever is at the path must be a socket (a stale one is replaced; anything else is not the daemon's).
     */
    private void checkUnixSocketPath(final ListenAddress address, final String path)
    {
        if (address == null || !address.isUnix())
        {
            return;
        }
        final Path socket = address.unixPath();
        final boolean defaultSocket = address.equals(ListenAddress.parse(ApplianceConfig.DEFAULT_API_LISTEN));
        if (socket.getParent() != null && !Files.isDirectory(socket.getParent()) && !defaultSocket)
        {
            errors.add(path, "directory " + socket.getParent() + " of " + address + " does not exist");
            return;
        }
        try
        {
            if (Files.exists(socket, java.nio.file.LinkOption.NOFOLLOW_LINKS) &&
                ((Integer)Files.getAttribute(socket, "unix:mode", java.nio.file.LinkOption.NOFOLLOW_LINKS) & 0170000) !=
                0140000)
            {
                errors.add(path, socket + " exists and is not a socket; the daemon will not delete it");
            }
        }
        catch (final java.io.IOException | UnsupportedOperationException ex)
        {
            errors.add(path, "cannot inspect " + socket + ": " + ex.getMessage());
        }
    }

    private void checkInterfaceExists(final String name, final String path)
    {
        // /proc/self/net/dev lists every interface of this process's network namespace, addressed or not.
        // NetworkInterface misses interfaces without an IP address (an appliance port usually has none).
        final Path procNetDev = Path.of("/proc/self/net/dev");
        if (Files.isReadable(procNetDev))
        {
            try
            {
                final boolean found = Files.readAllLines(procNetDev).stream()
                    .filter(line -> line.indexOf(':') > 0)
                    .map(line -> line.substring(0, line.indexOf(':')).trim())
                    .anyMatch(name::equals);
                if (!found)
                {
                    errors.add(path, "no network interface '" + name + "' on this host");
                }
                return;
            }
            catch (final IOException ex)
            {
                // fall through to the JDK's view
            }
        }
        try
        {
            if (NetworkInterface.getByName(name) == null)
            {
                errors.add(path, "no network interface '" + name + "' on this host");
            }
        }
        catch (final SocketException ex)
        {
            errors.add(path, "cannot look up interface '" + name + "': " + ex.getMessage());
        }
    }

    private void checkRing(final RingConfig ring, final String path)
    {
        if (!isRingIdValid(ring.id()))
        {
            errors.add(child(path, "id"), "ring id " + ring.id() + " is not in 0.." + RingConfig.MAX_ID);
        }
        final String windowPath = child(path, "window");
        if (ring.window() < 1 || ring.window() > RingConfig.MAX_WINDOW || Integer.bitCount(ring.window()) != 1)
        {
            errors.add(windowPath, "window " + ring.window() + " is not a power of two in 1.." +
                RingConfig.MAX_WINDOW + " (MsgID is 8 bits and the aggregator index is MsgID % 2N)");
        }
        range(ring.msgLen(), 1, RingConfig.MAX_MSG_LEN, child(path, "msgLen"));
        final String pmtuPath = child(path, "pmtu");
        final boolean pmtuValid = RingConfig.PMTUS.contains(ring.pmtu());
        if (!pmtuValid)
        {
            errors.add(pmtuPath, "PMTU " + ring.pmtu() + " is not one of " + RingConfig.PMTUS);
        }
        final String payloadPath = child(path, "payloadSize");
        final ElementType type = ring.elementType();
        if (ring.payloadSize() < 1)
        {
            errors.add(payloadPath, "payload size " + ring.payloadSize() + " must be at least 1");
        }
        else if (type != null && ring.payloadSize() % type.size() != 0)
        {
            errors.add(payloadPath, "payload size " + ring.payloadSize() + " is not a multiple of the " +
                type.cliName() + " element size " + type.size());
        }
        else if (pmtuValid && ring.payloadSize() > ring.pmtu())
        {
            errors.add(payloadPath, "payload size " + ring.payloadSize() + " exceeds the PMTU " + ring.pmtu());
        }
        for (final String key : new String[] {"inetTag", "resultTag"})
        {
            final String tag = "inetTag".equals(key) ? ring.inetTag() : ring.resultTag();
            if (!RingConfig.isValidTag(tag))
            {
                errors.add(child(path, key), "'" + tag + "' is not 4 printable ASCII characters (the InetTag is " +
                    "4 bytes, e.g. NRED)");
            }
        }
        checkMembers(ring.members(), child(path, "members"));
        checkRacks(ring, path);
    }

    /**
     * A multi-rack ring (paper §3.3): a spine and at least two racks, each with its own leaf, holding consecutive
     * ranks in ring order from rank 0 to W-1, so that every rack has exactly one connection leaving it and one
     * entering it (the virtual switch-to-switch connections the dataplane needs). The element type, window, MsgLen,
     * payload size and tags are the ring's own, so every appliance of the ring aggregates with the same ones.
     */
    private void checkRacks(final RingConfig ring, final String path)
    {
        final String racksPath = child(path, "racks");
        final String spinePath = child(path, "spine");
        if (ring.racks().isEmpty())
        {
            if (ring.spine() != null)
            {
                errors.add(racksPath, "a ring with a spine needs its racks (each with its leaf and ranks); " +
                    "a single-rack ring has neither");
            }
            return;
        }
        if (ring.spine() == null)
        {
            errors.add(spinePath, "a ring with racks needs the name of its spine appliance");
        }
        else if (!JOB_NAME.matcher(ring.spine()).matches())
        {
            errors.add(spinePath, "spine name '" + ring.spine() + "' " + NAME_RULE);
        }
        if (ring.racks().size() < 2)
        {
            errors.add(racksPath, "a multi-rack ring needs at least 2 racks, got " + ring.racks().size() +
                " (a single rack is a flat ring: remove racks and spine)");
        }
        final Map<String, String> leaves = new HashMap<>();
        int expected = 0;
        boolean consecutive = true;
        for (int k = 0; k < ring.racks().size(); k++)
        {
            final RackConfig rack = ring.racks().get(k);
            final String rackPath = index(racksPath, k);
            final String leafPath = child(rackPath, "leaf");
            if (!JOB_NAME.matcher(rack.leaf()).matches())
            {
                errors.add(leafPath, "leaf name '" + rack.leaf() + "' " + NAME_RULE);
            }
            else if (rack.leaf().equals(ring.spine()))
            {
                errors.add(leafPath, "'" + rack.leaf() + "' is the ring's spine: an appliance has one role in a " +
                    "ring");
            }
            else
            {
                final String previous = leaves.putIfAbsent(rack.leaf(), leafPath);
                if (previous != null)
                {
                    errors.add(leafPath, "duplicate leaf '" + rack.leaf() + "' (also " + previous +
                        "): an appliance serves one rack of a ring");
                }
            }
            final String ranksPath = child(rackPath, "ranks");
            if (rack.ranks().isEmpty())
            {
                errors.add(ranksPath, "a rack needs at least one rank");
                consecutive = false;
            }
            for (int i = 0; i < rack.ranks().size() && consecutive; i++)
            {
                final int rank = rack.ranks().get(i);
                if (rank != expected)
                {
                    errors.add(index(ranksPath, i), "expected rank " + expected + ", got " + rank +
                        " (racks hold consecutive ranks in ring order, rack 0 from rank 0, so that each rack has " +
                        "one connection leaving it and one entering it)");
                    consecutive = false;
                }
                expected++;
            }
        }
        if (consecutive && expected != ring.worldSize())
        {
            errors.add(racksPath, "the racks hold ranks 0.." + (expected - 1) + " but the ring has " +
                ring.worldSize() + " members: every rank must be in a rack");
        }
        if (!RingConfig.isValidTag(ring.inetTag()) || !RingConfig.isValidTag(ring.resultTag()))
        {
            return;
        }
        if (ring.inetTagValue() == Hierarchy.PARTIAL_TAG || ring.resultTagValue() == Hierarchy.PARTIAL_TAG)
        {
            errors.add(child(path, ring.inetTagValue() == Hierarchy.PARTIAL_TAG ? "inetTag" : "resultTag"),
                "the tag NRPT marks a leaf's partial sums; a multi-rack ring's tags must differ from it");
        }
        else if (ring.inetTag().equals(ring.resultTag()))
        {
            errors.add(child(path, "resultTag"), "a multi-rack ring needs a resultTag other than its inetTag: " +
                "a leaf tells the spine's result from a raw gradient by it");
        }
    }

    private void checkMembers(final List<MemberConfig> members, final String path)
    {
        final int worldSize = members.size();
        if (worldSize < RingConfig.MIN_WORLD_SIZE || worldSize > RingConfig.MAX_WORLD_SIZE)
        {
            errors.add(path, "world size " + worldSize + " is not in " + RingConfig.MIN_WORLD_SIZE + ".." +
                RingConfig.MAX_WORLD_SIZE);
        }
        final Map<Integer, String> ranks = new HashMap<>();
        final Map<InetAddress, String> addresses = new HashMap<>();
        for (int m = 0; m < worldSize; m++)
        {
            final MemberConfig member = members.get(m);
            final String memberPath = index(path, m);
            final String rankPath = child(memberPath, "rank");
            if (member.rank() < 0 || member.rank() >= worldSize)
            {
                errors.add(rankPath, "rank " + member.rank() + " is not in 0.." + (worldSize - 1) +
                    " (ranks are 0..worldSize-1)");
            }
            else
            {
                final String previous = ranks.putIfAbsent(member.rank(), rankPath);
                if (previous != null)
                {
                    errors.add(rankPath, "duplicate rank " + member.rank() + " (also " + previous + ")");
                }
            }

            final String ipPath = child(memberPath, "ip");
            if (member.ip() != null)
            {
                final InetAddress address = member.address();
                if (address == null)
                {
                    errors.add(ipPath, "not an IPv4 or IPv6 address");
                }
                else
                {
                    final String previous = addresses.putIfAbsent(address, ipPath);
                    if (previous != null)
                    {
                        errors.add(ipPath, "duplicate member address " + member.ip() + " (also " + previous + ")");
                    }
                }
            }
            if (member.mac() != null && !Addresses.isMac(member.mac()))
            {
                errors.add(child(memberPath, "mac"), "'" + member.mac() +
                    "' is not a MAC address like 02:00:00:00:00:01");
            }
            if (member.qpn() != null && (member.qpn() < 0 || member.qpn() > MemberConfig.MAX_QPN))
            {
                errors.add(child(memberPath, "qpn"), "QPN " + member.qpn() + " is not in 0..0xffffff (24 bits)");
            }
        }
        if (worldSize >= RingConfig.MIN_WORLD_SIZE && ranks.size() < worldSize)
        {
            final TreeSet<Integer> missing = new TreeSet<>();
            for (int rank = 0; rank < worldSize; rank++)
            {
                if (!ranks.containsKey(rank))
                {
                    missing.add(rank);
                }
            }
            errors.add(path, "ranks must be exactly 0.." + (worldSize - 1) + "; missing " + missing);
        }
        final long families = members.stream().map(MemberConfig::address).filter(java.util.Objects::nonNull)
            .map(address -> address.getAddress().length).distinct().count();
        if (families > 1)
        {
            errors.add(path, "members mix IPv4 and IPv6 addresses: a ring's connections are all one family");
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
                // of the other racks' leaves, or rings whose spine is another appliance.
                if (isSizable(ring) && (ring.racks().isEmpty() || isServed(ring, config.appliance().name())))
                {
                    final long bytes = ring.aggregatorBytes();
                    total += bytes;
                    parts.add(index(child(index("jobs", j), "rings"), r) + " " + ByteSize.human(bytes));
                }
            }
        }
        final long budget = config.appliance().memoryBudget();
        if (budget > 0 && total > budget)
        {
            errors.add("appliance.memoryBudget", "rings need " + ByteSize.human(total) + " of aggregator memory (" +
                String.join(", ", parts) + "), over the budget of " + ByteSize.human(budget));
        }
    }

    private static boolean isServed(final RingConfig ring, final String applianceName)
    {
        return applianceName != null && (applianceName.equals(ring.spine()) ||
            ring.racks().stream().anyMatch(rack -> applianceName.equals(rack.leaf())));
    }

    private static boolean isSizable(final RingConfig ring)
    {
        return ring.window() >= 1 && ring.window() <= RingConfig.MAX_WINDOW &&
            ring.msgLen() >= 1 && ring.msgLen() <= RingConfig.MAX_MSG_LEN &&
            ring.payloadSize() >= 1 && ring.payloadSize() <= RingConfig.PMTUS.getLast();
    }

    private static boolean isRingIdValid(final int id)
    {
        return id >= 0 && id <= RingConfig.MAX_ID;
    }

    private void range(final int value, final int min, final int max, final String path)
    {
        if (value < min || value > max)
        {
            errors.add(path, value + " is not in " + min + ".." + max);
        }
    }
}
