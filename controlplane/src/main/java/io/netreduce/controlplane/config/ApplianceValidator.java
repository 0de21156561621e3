package io.netreduce.controlplane.config;

import io.netreduce.protocol.port.InterfaceMtu;
import io.netreduce.protocol.port.ThreadNice;

import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import static io.netreduce.controlplane.config.ConfigRules.NAME_RULE;
import static io.netreduce.controlplane.config.ConfigRules.isName;
import static io.netreduce.controlplane.config.ConfigRules.range;
import static io.netreduce.controlplane.config.ErrorCollector.child;
import static io.netreduce.controlplane.config.ErrorCollector.index;

/**
 * Checks of the appliance section: its ports (and, with {@code --check}, that their interfaces exist), the
 * dataplane settings, the memory budget, its name, the capture directory, and where the API and metrics listen.
 */
final class ApplianceValidator
{
    /** Linux interface names are at most IFNAMSIZ - 1 = 15 bytes. */
    private static final int MAX_INTERFACE_NAME = 15;

    private final ValidationOptions options;
    private final ErrorCollector errors;
    /** The MTU of each port's interface as this host has it, where the interfaces were checked. */
    private final Map<String, Integer> interfaceMtus = new HashMap<>();

    ApplianceValidator(final ValidationOptions options, final ErrorCollector errors)
    {
        this.options = options;
        this.errors = errors;
    }

    /**
     * @param port a port's name.
     * @return its interface's MTU on this host, where {@link #check} looked it up (the host's interfaces checked and
     * the interface there); null otherwise.
     */
    Integer interfaceMtu(final String port)
    {
        return interfaceMtus.get(port);
    }

    void check(final ApplianceConfig appliance, final String path)
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
                    if (!errors.hasErrorAt(namePath))
                    {
                        InterfaceMtu.of(port.name()).ifPresent(mtu -> interfaceMtus.put(port.name(), mtu));
                    }
                }
            }
            final Integer hostMtu = interfaceMtus.get(port.name());
            if (port.mtu() < PortConfig.MIN_MTU || port.mtu() > PortConfig.MAX_MTU)
            {
                errors.add(child(portPath, "mtu"),
                    "MTU " + port.mtu() + " is not in " + PortConfig.MIN_MTU + ".." + PortConfig.MAX_MTU);
            }
            else if (hostMtu != null && port.mtu() > hostMtu)
            {
                // The kernel refuses a frame longer than the interface's MTU (EMSGSIZE): results of rings sized to
                // the configured MTU could never leave.
                errors.add(child(portPath, "mtu"), "MTU " + port.mtu() + " is larger than interface '" +
                    port.name() + "' has on this host (" + hostMtu +
                    "): frames that long could not be sent; raise the interface's MTU or lower this");
            }
            if (port.segmentationOffload() && port.type() != PortType.AF_PACKET)
            {
                errors.add(child(portPath, "segmentation_offload"), "segmentation offload needs an af_packet " +
                    "port (PACKET_VNET_HDR), but port '" + port.name() + "' is " + port.type().configName());
            }
        }

        final DataplaneConfig dataplane = appliance.dataplane();
        final String dataplanePath = child(path, "dataplane");
        range(errors, dataplane.batchSize(), 1, DataplaneConfig.MAX_BATCH_SIZE, child(dataplanePath, "batchSize"));
        range(errors, dataplane.lanes(), 1, DataplaneConfig.MAX_LANES, child(dataplanePath, "lanes"));
        range(errors, dataplane.laneNice(), ThreadNice.MIN_NICE, ThreadNice.MAX_NICE, child(dataplanePath, "laneNice"));
        range(errors, dataplane.cltEntries(), DataplaneConfig.MIN_CLT_ENTRIES, DataplaneConfig.MAX_CLT_ENTRIES,
            child(dataplanePath, "cltEntries"));
        range(errors, dataplane.cltForeignEntries(), 1, dataplane.cltEntries(),
            child(dataplanePath, "cltForeignEntries"));
        range(errors, dataplane.cltForeignPerSource(), 1, dataplane.cltForeignEntries(),
            child(dataplanePath, "cltForeignPerSource"));
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
        if (!(dataplane.ecnBacklog() >= 0.0 && dataplane.ecnBacklog() <= 1.0))
        {
            errors.add(child(dataplanePath, "ecnBacklog"), dataplane.ecnBacklog() +
                " is not a fraction of the receive queue in [0, 1] (0: the appliance never marks ECN itself)");
        }

        if (appliance.memoryBudget() <= 0)
        {
            errors.add(child(path, "memoryBudget"), "must be greater than zero");
        }
        if (appliance.name() != null && !isName(appliance.name()))
        {
            errors.add(child(path, "name"), "appliance name '" + appliance.name() + "' " + NAME_RULE);
        }
        checkCaptureDirectory(appliance.captureDirectory(), child(path, "captureDirectory"));
        checkApiAccess(appliance, child(path, "api"));
        if (options.checkInterfaces())
        {
            checkUnixSocketPath(appliance.api(), child(child(path, "api"), "listen"));
            checkUnixSocketPath(appliance.metrics(), child(child(path, "metrics"), "listen"));
            checkListen(appliance.api(), child(child(path, "api"), "listen"));
            checkListen(appliance.metrics(), child(child(path, "metrics"), "listen"));
            checkTokenFile(appliance, child(child(path, "api"), "tokenFile"));
        }
        if (appliance.api().equals(appliance.metrics()) &&
            (appliance.api().isUnix() || appliance.api().port() != 0))
        {
            errors.add(child(path, "metrics.listen"), "same address as appliance.api.listen (" +
                appliance.api() + ")");
        }
    }

    /** Directories a capture directory must not be: an API client could write pcap files over their content. */
    private static final Set<String> SYSTEM_DIRECTORIES = Set.of("/bin", "/boot", "/dev", "/etc",
        "/home", "/lib", "/lib64", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
        "/var", "/var/lib", "/var/log", "/var/run");

    private void checkCaptureDirectory(final String directory, final String path)
    {
        try
        {
            final Path dir = Path.of(directory).normalize();
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
        catch (final InvalidPathException ex)
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
            return InetAddress.getByName(address.host()).isLoopbackAddress();
        }
        catch (final UnknownHostException ex)
        {
            return false;
        }
    }

    /**
     * Whether the daemon could listen where the configuration says ({@link ListenCheck}): what start would refuse,
     * refused here, so that {@code --check} catches it and the unit does not restart into it.
     */
    private void checkListen(final ListenAddress address, final String path)
    {
        if (address == null || errors.hasErrorAt(path))
        {
            return;
        }
        final String problem = ListenCheck.problem(address);
        if (problem != null)
        {
            errors.add(path, problem);
        }
    }

    /**
     * The token file of an API on TCP: one that exists must be one the daemon would use (only its owner can read
     * it, it holds a token); a missing one must be one it can create.
     */
    private void checkTokenFile(final ApplianceConfig appliance, final String path)
    {
        if (appliance.api() == null || appliance.api().isUnix() || appliance.apiTokenFile() == null ||
            errors.hasErrorAt(path) || !Path.of(appliance.apiTokenFile()).isAbsolute())
        {
            return;
        }
        final Path file = Path.of(appliance.apiTokenFile());
        try
        {
            if (Files.exists(file))
            {
                io.netreduce.controlplane.api.TokenFile.read(file);
                return;
            }
            Path existing = file.getParent();
            while (existing != null && !Files.exists(existing))
            {
                existing = existing.getParent();
            }
            if (existing == null || !Files.isDirectory(existing))
            {
                errors.add(path, "cannot create " + file + ": " + existing + " is not a directory");
                return;
            }
            final Path probe = Files.createTempFile(existing, ".nrchk", null);
            Files.delete(probe);
        }
        catch (final IOException ex)
        {
            errors.add(path, Files.exists(file) ? ex.getMessage() : "cannot create " + file + ": " + ex.getMessage());
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
            if (Files.exists(socket, LinkOption.NOFOLLOW_LINKS) &&
                ((Integer)Files.getAttribute(socket, "unix:mode", LinkOption.NOFOLLOW_LINKS) & 0170000) !=
                0140000)
            {
                errors.add(path, socket + " exists and is not a socket; the daemon will not delete it");
            }
        }
        catch (final IOException | UnsupportedOperationException ex)
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
}
