package io.netreduce.daemon.ctl;

import io.netreduce.controlplane.api.ApplianceControl;
import io.netreduce.controlplane.api.CaptureInfo;
import io.netreduce.controlplane.api.CltEntry;
import io.netreduce.controlplane.api.CttEntry;
import io.netreduce.controlplane.api.CounterValue;
import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.ControlApi;
import io.netreduce.controlplane.api.HttpEndpoint;
import io.netreduce.controlplane.api.LatencySummary;
import io.netreduce.controlplane.api.RingInstaller;
import io.netreduce.controlplane.api.RingOccupancy;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.ListenAddress;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netreduce.daemon.NetreduceMain;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;

class CtlCommandTest
{
    private static final String CONFIG = """
        appliance:
          ports: [{ name: eth1 }]
        jobs:
          - name: bert
            rings:
              - id: 10
                elementType: fp16
                window: 4
                msgLen: 8
                payloadSize: 1024
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.1.1, mac: "02:00:00:00:01:01", qpn: 17 }
                  - { rank: 1, ip: 10.0.1.2 }
                  - { rank: 2, ip: 10.0.1.3 }
        """;

    private static final String JOB = """
        name: dlrm
        rings:
          - id: 20
            elementType: int32
            window: 2
            msgLen: 4
            payloadSize: 256
            pmtu: 256
            members:
              - { rank: 0, ip: 10.0.2.1 }
              - { rank: 1, ip: 10.0.2.2 }
        """;

    private final AtomicReference<String> configText = new AtomicReference<>(CONFIG);
    private HttpEndpoint endpoint;
    private ConfiguredAppliance configured;

    record Run(int status, String out, String err)
    {
    }

    @BeforeEach
    void start() throws Exception
    {
        configured = new ConfiguredAppliance(ConfigLoader.parse(CONFIG), () -> ConfigLoader.parse(configText.get()),
            RingInstaller.NONE, ValidationOptions.DOCUMENT_ONLY);
        endpoint = HttpEndpoint.start("ctl-test", ListenAddress.parse("127.0.0.1:0"),
            new ControlApi(withDataplaneViews(configured)));
    }

    @AfterEach
    void stop()
    {
        endpoint.close();
    }

    /**
     * The configured appliance plus fixed dataplane views, standing in below the API boundary for the dataplane.
     */
    private static ApplianceControl withDataplaneViews(final ConfiguredAppliance configured)
    {
        final Map<String, Object> views = new LinkedHashMap<>();
        views.put("counters", List.of(
            new CounterValue("netreduce_dataplane_frames_received", Map.of(), "frames received", 1234L),
            new CounterValue("netreduce_dataplane_drops", Map.of("reason", "bad_rank"), "drop: rank outside the ring",
                2L)));
        views.put("clt", List.of(new CltEntry("10.0.1.1", "10.0.1.2", 0x11, 10, 0, 3, 4096)));
        final CttEntry.Connection up = new CttEntry.Connection(1, "10.0.1.2", "10.0.2.1");
        final CttEntry.Connection down = new CttEntry.Connection(3, "10.0.2.2", "10.0.1.1");
        views.put("ctt", List.of(
            new CttEntry(20, "bert", "leaf", 0, "up", "install", up, true, 0x12, 4, 8192,
                List.of(new CttEntry.Connection(0, "10.0.1.1", "10.0.1.2"), up), List.of(up)),
            new CttEntry(20, "bert", "leaf", 0, "down", "first-packet", down, false, -1, -1, -1,
                List.of(down), List.of(new CttEntry.Connection(0, "10.0.1.1", "10.0.1.2"), down))));
        views.put("occupancy", new RingOccupancy(10, 3, List.of(
            new RingOccupancy.AggregatorOccupancy(3, 5, List.of(0, 2), List.of(1), 1_500_000))));
        views.put("captures", List.of(
            new CaptureInfo("1", "eth1", false, "/var/lib/netreduce/captures/a.pcap", 120, true, 3, 0, null, null),
            new CaptureInfo("2", null, true, "/var/lib/netreduce/captures/d.pcap", 7, false, 0, 10,
                "/var/lib/netreduce/captures/d.pcap.reasons", "writing d.pcap failed: No space left on device")));
        views.put("latency", List.of(new LatencySummary("aggregation", "bert", 10, 1000, 2_000, 5_000, 12_345,
            80_000, 1_200_000)));
        return (ApplianceControl)Proxy.newProxyInstance(ApplianceControl.class.getClassLoader(),
            new Class<?>[] { ApplianceControl.class }, (proxy, method, args) ->
            {
                if (views.containsKey(method.getName()))
                {
                    return views.get(method.getName());
                }
                try
                {
                    return method.invoke(configured, args);
                }
                catch (final InvocationTargetException ex)
                {
                    throw ex.getCause();
                }
            });
    }

    private Run ctl(final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine commandLine = NetreduceMain.commandLine();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        final String[] full = new String[args.length + 3];
        full[0] = "ctl";
        full[1] = "--api";
        full[2] = endpoint.boundAddress().toString();
        System.arraycopy(args, 0, full, 3, args.length);
        return new Run(commandLine.execute(full), out.toString(), err.toString());
    }

    @Test
    void shouldListJobsAsATable()
    {
        final Run run = ctl("jobs");

        assertThat(run.status()).isZero();
        assertThat(run.out()).isEqualTo("""
            JOB   RINGS  RING IDS  RANKS
            bert  1      10        3
            """);
    }

    @Test
    void shouldShowAJobWithRingsAndMembers()
    {
        final Run run = ctl("job", "bert");

        assertThat(run.status()).isZero();
        assertThat(run.out()).contains("RING  ELEMENT  WINDOW  MSGLEN  PAYLOAD  PMTU  RANKS")
            .contains("10    fp16     4       8       1024     1024  3")
            .contains("10    0     10.0.1.1  02:00:00:00:01:01  17")
            .contains("10    1     10.0.1.2  -                  -");
    }

    @Test
    void shouldPrintJsonWhenAsked() throws Exception
    {
        final Run run = ctl("--json", "job", "bert");

        assertThat(run.status()).isZero();
        assertThat(new com.fasterxml.jackson.databind.ObjectMapper().readTree(run.out()).path("rings").get(0)
            .path("members").get(0).path("qpn").asInt()).isEqualTo(17);
    }

    @Test
    void shouldAddAndRemoveAJob(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("dlrm.yaml");
        Files.writeString(file, JOB);

        final Run added = ctl("add-job", file.toString());
        assertThat(added.status()).isZero();
        assertThat(added.out()).isEqualTo("added job dlrm with 1 ring(s)\n");
        assertThat(ctl("jobs").out()).contains("dlrm  1      20        2");

        final Run removed = ctl("remove-job", "dlrm");
        assertThat(removed.out()).isEqualTo("removed job dlrm\n");
        assertThat(configured.job("dlrm")).isEmpty();
    }

    @Test
    void shouldPrintEveryPathErrorWhenAJobIsRefused(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("bad.yaml");
        Files.writeString(file, JOB.replace("ip: 10.0.2.2", "ip: 10.0.2"));

        final Run run = ctl("add-job", file.toString());

        assertThat(run.status()).isEqualTo(CtlCommand.EXIT_REFUSED);
        assertThat(run.err()).isEqualTo("""
            error: 1 configuration error
              rings[0].members[1].ip: not an IPv4 or IPv6 address
            """);
        final Path taken = dir.resolve("taken.yaml");
        Files.writeString(taken, JOB.replace("id: 20", "id: 10"));
        final Run takenRun = ctl("add-job", taken.toString());
        assertThat(takenRun.status()).isEqualTo(CtlCommand.EXIT_REFUSED);
        assertThat(takenRun.err()).contains("  jobs[1].rings[0].id: ring id 10 is already used by jobs[0].rings[0].id");
    }

    @Test
    void shouldSayWhatIsWrongWithAJobFileItCannotSendWithoutAskingTheDaemon(@TempDir final Path dir) throws Exception
    {
        final Run missing = ctl("add-job", dir.resolve("none.yaml").toString());
        assertThat(missing.status()).isEqualTo(2);
        assertThat(missing.err()).isEqualTo("error: cannot read " + dir.resolve("none.yaml") + ": no such file\n");

        final Run endless = ctl("add-job", "/dev/zero");
        assertThat(endless.status()).isEqualTo(2);
        assertThat(endless.err()).isEqualTo("error: /dev/zero is larger than 4 MiB: not a job file\n");

        final Path binary = Files.write(dir.resolve("job.bin"), new byte[] { (byte)0xC3, 0x28 });
        final Run notText = ctl("add-job", binary.toString());
        assertThat(notText.status()).isEqualTo(2);
        assertThat(notText.err()).isEqualTo("error: " + binary + " is not UTF-8: byte 0xC3 at line 1, column 1\n");
        assertThat(ctl("jobs").out()).doesNotContain("none");
    }

    @Test
    void shouldReportUnknownJobAndUnreachableApi()
    {
        final Run unknown = ctl("job", "nope");
        assertThat(unknown.status()).isEqualTo(CtlCommand.EXIT_REFUSED);
        assertThat(unknown.err()).isEqualTo("error: no job 'nope'\n");

        final StringWriter err = new StringWriter();
        final CommandLine commandLine = NetreduceMain.commandLine();
        commandLine.setErr(new PrintWriter(err, true));
        final int status = commandLine.execute("ctl", "--api", "unix:/nonexistent/netreduce.sock", "jobs");
        assertThat(status).isEqualTo(CtlCommand.EXIT_UNREACHABLE);
        assertThat(err.toString()).startsWith("error: cannot reach the netreduce API at unix:/nonexistent/netreduce.sock");
    }

    @Test
    void shouldShowCountersCltOccupancyAndLatency()
    {
        assertThat(ctl("counters").out()).isEqualTo("""
            COUNTER                      VALUE
            drop: rank outside the ring  2
            frames received              1234
            """);
        assertThat(ctl("--json", "counters").out()).as("stable keys: the Prometheus series").contains(
            "\"netreduce_dataplane_drops{reason=\\\"bad_rank\\\"}\" : {", "\"value\" : 2",
            "\"description\" : \"drop: rank outside the ring\"", "\"netreduce_dataplane_frames_received\" : {");
        assertThat(ctl("clt").out()).isEqualTo("""
            SRC       DST       DST QPN   RING  RANK  MSGID  PSN0
            10.0.1.1  10.0.1.2  0x000011  10    0     3      4096
            """);
        assertThat(ctl("ctt").out()).isEqualTo("""
            RING  TIER  RACK  ROLE  CONNECTION            POPULATED     DST QPN   MSGID  PSN0  TRIGGERS  LEAVES ON
            20    leaf  0     up    1 10.0.1.2->10.0.2.1  install       0x000012  4      8192  0,1       1
            20    leaf  0     down  3 10.0.2.2->10.0.1.1  first-packet  not yet   -      -     3         0,3
            """);
        assertThat(ctl("occupancy", "10").out()).isEqualTo("""
            ring 10, 3 ranks, 1 incomplete aggregator(s)
            MSGID  PACKET  AGE    ARRIVED  MISSING
            3      5       1.5ms  0,2      1
            """);
        assertThat(ctl("latency").out()).isEqualTo("""
            NAME         JOB   RING  COUNT  P50    P90    P99     P99.9   MAX
            aggregation  bert  10    1000   2.0us  5.0us  12.3us  80.0us  1.2ms
            """);
    }

    @Test
    void shouldReloadAndSummariseTheDifference()
    {
        configText.set(CONFIG + JOB.indent(4).replaceFirst("    name", "  - name"));

        final Run run = ctl("reload");

        assertThat(run.status()).isZero();
        assertThat(run.out()).contains("jobs added: dlrm").contains("rings added: dlrm/20")
            .contains("rings unchanged: bert/10").contains("rings changed: none");
    }

    @Test
    void shouldListCapturesWithTheirStateAndErrors()
    {
        final Run run = ctl("captures");

        assertThat(run.status()).isZero();
        assertThat(run.out()).isEqualTo("""
            ID  WHAT       STATE    FRAMES  LOST  FILE
            1   port eth1  running  120     3     /var/lib/netreduce/captures/a.pcap
            2   drops      failed   7/10    0     /var/lib/netreduce/captures/d.pcap
            capture 2: writing d.pcap failed: No space left on device
            """);
    }

    @Test
    void shouldRefuseACaptureWithNeitherPortNorDropsAndRequireAFile()
    {
        final Run neither = ctl("capture", "start", "--file", "x.pcap");
        assertThat(neither.status()).isEqualTo(CtlCommand.EXIT_REFUSED);
        assertThat(neither.err()).isEqualTo("error: bad capture request: give a 'port' or set 'drops' to true\n");

        final Run noFile = ctl("capture", "start", "--port", "eth1");
        assertThat(noFile.status()).isEqualTo(2);
        assertThat(noFile.err()).startsWith("Missing required option: '--file=FILE'");

        final Run noDataplane = ctl("capture", "start", "--port", "eth1", "--file", "x.pcap");
        assertThat(noDataplane.status()).isEqualTo(CtlCommand.EXIT_REFUSED);
        assertThat(noDataplane.err()).isEqualTo("error: not available: no dataplane attached to this control plane\n");
    }
}
