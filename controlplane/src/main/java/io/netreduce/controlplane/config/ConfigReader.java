package io.netreduce.controlplane.config;

import io.netreduce.protocol.element.ElementType;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.function.Function;

import static io.netreduce.controlplane.config.ErrorCollector.child;
import static io.netreduce.controlplane.config.ErrorCollector.index;

/**
 * Turns a parsed YAML/JSON tree into the configuration records, reporting every structural problem (unknown key,
 * missing key, wrong type, unparseable value) with its path instead of stopping at the first one, which is what
 * binding with FAIL_ON_UNKNOWN_PROPERTIES would do. A value that cannot be read is replaced by a placeholder (0,
 * null or the default) so reading continues; {@link ConfigValidator} does the range and cross-field checks and
 * does not report again at a path that already has an error.
 */
final class ConfigReader
{
    private static final Set<String> ROOT_KEYS = Set.of("appliance", "jobs");
    private static final Set<String> APPLIANCE_KEYS =
        Set.of("name", "ports", "dataplane", "memoryBudget", "api", "metrics", "logging", "captureDirectory",
            "switchml");
    private static final Set<String> PORT_KEYS = Set.of("name", "mtu", "type", "segmentation_offload");
    private static final Set<String> DATAPLANE_KEYS = Set.of(
        "idleStrategy", "batchSize", "commandQueueCapacity", "dropProbability", "dropSeed", "lanes", "laneNice",
        "ecnBacklog",
        "cltEntries", "cltForeignEntries", "cltForeignPerSource");
    private static final Set<String> LISTEN_KEYS = Set.of("listen");
    private static final Set<String> API_KEYS = Set.of("listen", "tokenFile");
    private static final Set<String> LOGGING_KEYS = Set.of("level");
    private static final Set<String> JOB_KEYS = Set.of("name", "rings", "switchml");
    private static final Set<String> RING_KEYS =
        Set.of("id", "elementType", "window", "msgLen", "payloadSize", "pmtu", "members", "inetTag", "resultTag",
            "spine", "racks", "appliance");
    private static final Set<String> RACK_KEYS = Set.of("leaf", "ranks");
    private static final Set<String> MEMBER_KEYS = Set.of("rank", "ip", "mac", "qpn");

    private final ErrorCollector errors;
    private final SwitchMlConfigReader switchMl;

    ConfigReader(final ErrorCollector errors)
    {
        this.errors = errors;
        this.switchMl = new SwitchMlConfigReader(this, errors);
    }

    NetreduceConfig readConfig(final JsonNode root)
    {
        final String path = "";
        if (!isObject(root, path, "a mapping with keys appliance and jobs"))
        {
            return null;
        }
        checkKeys(root, path, ROOT_KEYS);
        final ApplianceConfig appliance = readAppliance(required(root, path, "appliance"), "appliance");
        final List<JobConfig> jobs = new ArrayList<>();
        final JsonNode jobsNode = root.get("jobs");
        if (jobsNode != null && isArray(jobsNode, "jobs"))
        {
            for (int i = 0; i < jobsNode.size(); i++)
            {
                final JobConfig job = readJob(jobsNode.get(i), index("jobs", i));
                if (job != null)
                {
                    jobs.add(job);
                }
            }
        }
        return new NetreduceConfig(appliance, jobs);
    }

    JobConfig readJob(final JsonNode node, final String path)
    {
        if (!isObject(node, path, "a job mapping with keys name and rings (or switchml)"))
        {
            return null;
        }
        checkKeys(node, path, JOB_KEYS);
        final String name = string(required(node, path, "name"), child(path, "name"), "");
        final List<RingConfig> rings = new ArrayList<>();
        final JsonNode switchMlNode = node.get("switchml");
        final SwitchMlJobConfig switchml =
            switchMlNode == null ? null : switchMl.readJob(switchMlNode, child(path, "switchml"));
        // A SwitchML job has no rings; a NetReduce job must list them.
        final JsonNode ringsNode = switchMlNode == null ? required(node, path, "rings") : node.get("rings");
        final String ringsPath = child(path, "rings");
        if (ringsNode != null && isArray(ringsNode, ringsPath))
        {
            for (int i = 0; i < ringsNode.size(); i++)
            {
                final RingConfig ring = readRing(ringsNode.get(i), index(ringsPath, i));
                if (ring != null)
                {
                    rings.add(ring);
                }
            }
        }
        return new JobConfig(name, rings, switchml);
    }

    private ApplianceConfig readAppliance(final JsonNode node, final String path)
    {
        if (node == null || !isObject(node, path, "a mapping"))
        {
            // A placeholder so the jobs are still checked; the error at "appliance" hides errors below it.
            return new ApplianceConfig(List.of(), DataplaneConfig.defaults(),
                ApplianceConfig.DEFAULT_MEMORY_BUDGET,
                ListenAddress.parse(ApplianceConfig.DEFAULT_API_LISTEN),
                ListenAddress.parse(ApplianceConfig.DEFAULT_METRICS_LISTEN), ApplianceConfig.DEFAULT_LOG_LEVEL);
        }
        checkKeys(node, path, APPLIANCE_KEYS);
        final List<PortConfig> ports = new ArrayList<>();
        final JsonNode portsNode = required(node, path, "ports");
        final String portsPath = child(path, "ports");
        if (portsNode != null && isArray(portsNode, portsPath))
        {
            for (int i = 0; i < portsNode.size(); i++)
            {
                final String portPath = index(portsPath, i);
                final JsonNode portNode = portsNode.get(i);
                if (isObject(portNode, portPath, "a port mapping with keys name, mtu, type and segmentation_offload"))
                {
                    checkKeys(portNode, portPath, PORT_KEYS);
                    final PortType type = named(portNode.get("type"), child(portPath, "type"),
                        PortConfig.DEFAULT_TYPE, PortType::fromConfigName, "af_packet or af_xdp");
                    ports.add(new PortConfig(
                        string(required(portNode, portPath, "name"), child(portPath, "name"), ""),
                        integer(portNode.get("mtu"), child(portPath, "mtu"), PortConfig.DEFAULT_MTU),
                        type,
                        bool(portNode.get("segmentation_offload"), child(portPath, "segmentation_offload"),
                            PortConfig.defaultSegmentationOffload(type))));
                }
            }
        }

        DataplaneConfig dataplane = DataplaneConfig.defaults();
        final JsonNode dataplaneNode = node.get("dataplane");
        final String dataplanePath = child(path, "dataplane");
        if (dataplaneNode != null && isObject(dataplaneNode, dataplanePath, "a mapping"))
        {
            checkKeys(dataplaneNode, dataplanePath, DATAPLANE_KEYS);
            final int cltEntries = integer(dataplaneNode.get("cltEntries"), child(dataplanePath, "cltEntries"),
                DataplaneConfig.DEFAULT_CLT_ENTRIES);
            final int cltForeignEntries = integer(dataplaneNode.get("cltForeignEntries"),
                child(dataplanePath, "cltForeignEntries"), DataplaneConfig.defaultCltForeignEntries(cltEntries));
            dataplane = new DataplaneConfig(
                named(dataplaneNode.get("idleStrategy"), child(dataplanePath, "idleStrategy"),
                    DataplaneConfig.DEFAULT_IDLE_STRATEGY, IdleStrategyKind::fromConfigName,
                    "busy-spin, yield, backoff, sleep or poll"),
                integer(dataplaneNode.get("batchSize"), child(dataplanePath, "batchSize"),
                    DataplaneConfig.DEFAULT_BATCH_SIZE),
                integer(dataplaneNode.get("commandQueueCapacity"), child(dataplanePath, "commandQueueCapacity"),
                    DataplaneConfig.DEFAULT_COMMAND_QUEUE_CAPACITY),
                decimal(dataplaneNode.get("dropProbability"), child(dataplanePath, "dropProbability"),
                    DataplaneConfig.DEFAULT_DROP_PROBABILITY),
                longInteger(dataplaneNode.get("dropSeed"), child(dataplanePath, "dropSeed"),
                    DataplaneConfig.DEFAULT_DROP_SEED),
                integer(dataplaneNode.get("lanes"), child(dataplanePath, "lanes"), DataplaneConfig.DEFAULT_LANES),
                integer(dataplaneNode.get("laneNice"), child(dataplanePath, "laneNice"),
                    DataplaneConfig.DEFAULT_LANE_NICE),
                cltEntries,
                cltForeignEntries,
                integer(dataplaneNode.get("cltForeignPerSource"), child(dataplanePath, "cltForeignPerSource"),
                    DataplaneConfig.defaultCltForeignPerSource(cltForeignEntries)),
                decimal(dataplaneNode.get("ecnBacklog"), child(dataplanePath, "ecnBacklog"),
                    DataplaneConfig.DEFAULT_ECN_BACKLOG));
        }

        final long memoryBudget = size(node.get("memoryBudget"), child(path, "memoryBudget"),
            ApplianceConfig.DEFAULT_MEMORY_BUDGET);
        final JsonNode apiNode = node.get("api");
        final ListenAddress api = listen(apiNode, child(path, "api"), ApplianceConfig.DEFAULT_API_LISTEN, API_KEYS);
        final String apiTokenFile = apiNode == null || !apiNode.isObject() ? null :
            string(apiNode.get("tokenFile"), child(child(path, "api"), "tokenFile"), null);
        final ListenAddress metrics =
            listen(node.get("metrics"), child(path, "metrics"), ApplianceConfig.DEFAULT_METRICS_LISTEN, LISTEN_KEYS);

        LogLevel level = ApplianceConfig.DEFAULT_LOG_LEVEL;
        final JsonNode loggingNode = node.get("logging");
        final String loggingPath = child(path, "logging");
        if (loggingNode != null && isObject(loggingNode, loggingPath, "a mapping"))
        {
            checkKeys(loggingNode, loggingPath, LOGGING_KEYS);
            level = named(loggingNode.get("level"), child(loggingPath, "level"), level, LogLevel::fromConfigName,
                "trace, debug, info, warn or error");
        }
        final String captureDirectory = string(node.get("captureDirectory"), child(path, "captureDirectory"),
            ApplianceConfig.DEFAULT_CAPTURE_DIRECTORY);
        final String name = string(node.get("name"), child(path, "name"), null);
        final JsonNode switchMlNode = node.get("switchml");
        final SwitchMlApplianceConfig switchml =
            switchMlNode == null ? null : switchMl.readAppliance(switchMlNode, child(path, "switchml"));
        return new ApplianceConfig(ports, dataplane, memoryBudget, api, metrics, level, captureDirectory,
            apiTokenFile, name, switchml);
    }

    private RingConfig readRing(final JsonNode node, final String path)
    {
        if (!isObject(node, path, "a ring mapping"))
        {
            return null;
        }
        checkKeys(node, path, RING_KEYS);
        final int id = integer(required(node, path, "id"), child(path, "id"), -1);
        final ElementType elementType = named(required(node, path, "elementType"), child(path, "elementType"),
            null, ElementType::fromCliName, "fp32, fp16, bf16 or int32");
        final int window = integer(required(node, path, "window"), child(path, "window"), 0);
        final int msgLen = integer(required(node, path, "msgLen"), child(path, "msgLen"), 0);
        final int payloadSize = integer(required(node, path, "payloadSize"), child(path, "payloadSize"), 0);
        final int pmtu = integer(required(node, path, "pmtu"), child(path, "pmtu"), 0);
        final String inetTag = string(node.get("inetTag"), child(path, "inetTag"), RingConfig.DEFAULT_INET_TAG);
        final String resultTag = string(node.get("resultTag"), child(path, "resultTag"),
            RingConfig.DEFAULT_RESULT_TAG);
        final List<MemberConfig> members = new ArrayList<>();
        final JsonNode membersNode = required(node, path, "members");
        final String membersPath = child(path, "members");
        if (membersNode != null && isArray(membersNode, membersPath))
        {
            for (int i = 0; i < membersNode.size(); i++)
            {
                final String memberPath = index(membersPath, i);
                final JsonNode memberNode = membersNode.get(i);
                if (isObject(memberNode, memberPath, "a member mapping with keys rank, ip, mac, qpn"))
                {
                    checkKeys(memberNode, memberPath, MEMBER_KEYS);
                    final JsonNode qpnNode = memberNode.get("qpn");
                    members.add(new MemberConfig(
                        integer(required(memberNode, memberPath, "rank"), child(memberPath, "rank"), -1),
                        string(required(memberNode, memberPath, "ip"), child(memberPath, "ip"), null),
                        string(memberNode.get("mac"), child(memberPath, "mac"), null),
                        qpnNode == null ? null : integer(qpnNode, child(memberPath, "qpn"), 0)));
                }
                else
                {
                    // Keep the index aligned with the document so later paths name the right element.
                    members.add(new MemberConfig(-1, null, null, null));
                }
            }
        }
        final String spine = string(node.get("spine"), child(path, "spine"), null);
        final List<RackConfig> racks = readRacks(node.get("racks"), child(path, "racks"));
        final String appliance = string(node.get("appliance"), child(path, "appliance"), null);
        return new RingConfig(id, elementType, window, msgLen, payloadSize, pmtu, members, inetTag, resultTag,
            spine, racks, appliance);
    }

    private List<RackConfig> readRacks(final JsonNode node, final String path)
    {
        final List<RackConfig> racks = new ArrayList<>();
        if (node == null || !isArray(node, path))
        {
            return racks;
        }
        for (int k = 0; k < node.size(); k++)
        {
            final String rackPath = index(path, k);
            final JsonNode rackNode = node.get(k);
            final List<Integer> ranks = new ArrayList<>();
            String leaf = "";
            if (isObject(rackNode, rackPath, "a rack mapping with keys leaf and ranks"))
            {
                checkKeys(rackNode, rackPath, RACK_KEYS);
                leaf = string(required(rackNode, rackPath, "leaf"), child(rackPath, "leaf"), "");
                final JsonNode ranksNode = required(rackNode, rackPath, "ranks");
                final String ranksPath = child(rackPath, "ranks");
                if (ranksNode != null && isArray(ranksNode, ranksPath))
                {
                    for (int i = 0; i < ranksNode.size(); i++)
                    {
                        ranks.add(integer(ranksNode.get(i), index(ranksPath, i), -1));
                    }
                }
            }
            // A rack that could not be read stays in the list, so later paths name the right index.
            racks.add(new RackConfig(leaf, ranks));
        }
        return racks;
    }

    private ListenAddress listen(final JsonNode node, final String path, final String defaultText,
        final Set<String> keys)
    {
        final ListenAddress fallback = ListenAddress.parse(defaultText);
        if (node == null || !isObject(node, path, "a mapping with key listen"))
        {
            return fallback;
        }
        checkKeys(node, path, keys);
        final String listenPath = child(path, "listen");
        final String text = string(node.get("listen"), listenPath, null);
        if (text == null)
        {
            return fallback;
        }
        try
        {
            return ListenAddress.parse(text);
        }
        catch (final IllegalArgumentException ex)
        {
            errors.add(listenPath, ex.getMessage());
            return fallback;
        }
    }

    long size(final JsonNode node, final String path, final long defaultValue)
    {
        if (node == null)
        {
            return defaultValue;
        }
        if (node.isIntegralNumber() && node.canConvertToLong())
        {
            return node.asLong();
        }
        if (!node.isTextual())
        {
            errors.add(path, "expected a size like 512MiB, got " + describe(node));
            return defaultValue;
        }
        try
        {
            return ByteSize.parse(node.asText());
        }
        catch (final IllegalArgumentException ex)
        {
            errors.add(path, ex.getMessage());
            return defaultValue;
        }
    }

    <T> T named(
        final JsonNode node,
        final String path,
        final T defaultValue,
        final Function<String, T> lookup,
        final String choices)
    {
        if (node == null)
        {
            return defaultValue;
        }
        if (!node.isTextual())
        {
            errors.add(path, "expected one of " + choices + ", got " + describe(node));
            return defaultValue;
        }
        final T value = lookup.apply(node.asText());
        if (value == null)
        {
            errors.add(path, "'" + node.asText() + "' is not one of " + choices);
            return defaultValue;
        }
        return value;
    }

    double decimal(final JsonNode node, final String path, final double defaultValue)
    {
        if (node == null)
        {
            return defaultValue;
        }
        if (!node.isNumber())
        {
            errors.add(path, "expected a number, got " + describe(node));
            return defaultValue;
        }
        return node.doubleValue();
    }

    long longInteger(final JsonNode node, final String path, final long defaultValue)
    {
        if (node == null)
        {
            return defaultValue;
        }
        if (!node.isIntegralNumber() || !node.canConvertToLong())
        {
            errors.add(path, "expected a 64-bit integer, got " + describe(node));
            return defaultValue;
        }
        return node.longValue();
    }

    int integer(final JsonNode node, final String path, final int defaultValue)
    {
        if (node == null)
        {
            return defaultValue;
        }
        if (!node.isIntegralNumber())
        {
            errors.add(path, "expected an integer, got " + describe(node));
            return defaultValue;
        }
        if (!node.canConvertToInt())
        {
            errors.add(path, "integer " + node.asText() + " is out of range");
            return defaultValue;
        }
        return node.intValue();
    }

    boolean bool(final JsonNode node, final String path, final boolean defaultValue)
    {
        if (node == null)
        {
            return defaultValue;
        }
        if (!node.isBoolean())
        {
            errors.add(path, "expected true or false, got " + describe(node));
            return defaultValue;
        }
        return node.booleanValue();
    }

    String string(final JsonNode node, final String path, final String defaultValue)
    {
        if (node == null)
        {
            return defaultValue;
        }
        if (!node.isTextual())
        {
            errors.add(path, "expected a string, got " + describe(node));
            return defaultValue;
        }
        return node.asText();
    }

    JsonNode required(final JsonNode parent, final String path, final String key)
    {
        final JsonNode node = parent.get(key);
        if (node == null)
        {
            errors.add(child(path, key), "required key is missing");
        }
        return node;
    }

    boolean isObject(final JsonNode node, final String path, final String expected)
    {
        if (node == null || !node.isObject())
        {
            errors.add(path, "expected " + expected + ", got " + describe(node));
            return false;
        }
        return true;
    }

    boolean isArray(final JsonNode node, final String path)
    {
        if (!node.isArray())
        {
            errors.add(path, "expected a list, got " + describe(node));
            return false;
        }
        return true;
    }

    void checkKeys(final JsonNode node, final String path, final Set<String> allowed)
    {
        final Iterator<String> names = node.fieldNames();
        while (names.hasNext())
        {
            final String name = names.next();
            if (!allowed.contains(name))
            {
                errors.add(child(path, name), "unknown key (expected one of " + String.join(", ",
                    allowed.stream().sorted().toList()) + ")");
            }
        }
    }

    private static String describe(final JsonNode node)
    {
        if (node == null || node.isMissingNode())
        {
            return "nothing";
        }
        if (node.isNull())
        {
            return "null";
        }
        if (node.isObject())
        {
            return "a mapping";
        }
        if (node.isArray())
        {
            return "a list";
        }
        if (node.isTextual())
        {
            return "the string '" + node.asText() + "'";
        }
        if (node.isBoolean())
        {
            return "the boolean " + node.asText();
        }
        if (node.isNumber())
        {
            return "the number " + node.asText();
        }
        return node.getNodeType().toString().toLowerCase(java.util.Locale.ROOT);
    }
}
