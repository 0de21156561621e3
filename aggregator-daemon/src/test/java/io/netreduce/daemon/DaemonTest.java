package io.netreduce.daemon;

import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.NetreduceConfig;
import io.netreduce.controlplane.config.RingRef;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netreduce.controlplane.api.RingInstaller;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class DaemonTest
{
    static final String CONFIG = """
        appliance:
          ports: [{ name: lo }]
          memoryBudget: 64MiB
          api: { listen: "127.0.0.1:0", tokenFile: "/tmp/netreduce-test-api.token" }
          metrics: { listen: "127.0.0.1:0" }
        jobs:
          - name: a
            rings:
              - id: 1
                elementType: fp32
                window: 8
                msgLen: 16
                payloadSize: 1024
                pmtu: 1024
                members:
                  - { rank: 0, ip: 10.0.0.1 }
                  - { rank: 1, ip: 10.0.0.2 }
          - name: b
            rings:
              - id: 2
                elementType: fp16
                window: 4
                msgLen: 8
                payloadSize: 512
                pmtu: 512
                members:
                  - { rank: 0, ip: 10.0.1.1 }
                  - { rank: 1, ip: 10.0.1.2 }
        """;

    record Run(int status, String out, String err)
    {
    }

    static Run run(final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine commandLine = NetreduceMain.commandLine();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        final int status = commandLine.execute(args);
        return new Run(status, out.toString(), err.toString());
    }

    @Test
    void shouldExitWithStatus2AndPrintEveryErrorForABrokenConfig(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("broken.yaml");
        Files.writeString(file, CONFIG.replace("window: 8", "window: 0").replace("ip: 10.0.1.2", "ip: nope")
            .replace("name: lo", "name: nr-missing0"));

        final Run run = run("daemon", "--config", file.toString());

        assertThat(run.status()).isEqualTo(DaemonCommand.EXIT_CONFIG);
        assertThat(run.err()).contains("3 configuration error(s); not starting")
            .contains("appliance.ports[0].name: no network interface 'nr-missing0' on this host")
            .contains("jobs[0].rings[0].window: window 0 is not a power of two")
            .contains("jobs[1].rings[0].members[1].ip: not an IPv4 or IPv6 address");
    }

    @Test
    void shouldExitWithStatus1AndSayWhyWhenTheApiAddressIsTaken(@TempDir final Path dir) throws Exception
    {
        try (java.net.ServerSocket taken = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()))
        {
            final Path file = dir.resolve("taken.yaml");
            Files.writeString(file, CONFIG.replace("listen: \"127.0.0.1:0\", tokenFile",
                "listen: \"127.0.0.1:" + taken.getLocalPort() + "\", tokenFile"));

            final Run run = run("daemon", "--config", file.toString());

            assertThat(run.status()).isEqualTo(1);
            assertThat(run.err()).startsWith("netreduce: cannot start: ").contains("Address already in use")
                .contains("appliance.api.listen: cannot listen on 127.0.0.1:" + taken.getLocalPort());
        }
    }

    @Test
    void shouldRefuseAtCheckAListenPathOrAddressTheDaemonCouldNotBind(@TempDir final Path dir) throws Exception
    {
        // unix:/proc/self/x.sock passed --check (the directory exists), then the daemon exited 1 at start ("cannot
        // listen"), which Restart=on-failure turned into a restart loop. --check now binds what start would.
        final Path file = dir.resolve("unbindable.yaml");
        Files.writeString(file, CONFIG
            .replace("api: { listen: \"127.0.0.1:0\", tokenFile: \"/tmp/netreduce-test-api.token\" }",
                "api: { listen: \"unix:/proc/self/x.sock\" }")
            .replace("metrics: { listen: \"127.0.0.1:0\" }", "metrics: { listen: \"192.0.2.77:9741\" }"));

        final Run check = run("daemon", "--config", file.toString(), "--check");

        assertThat(check.status()).isEqualTo(DaemonCommand.EXIT_CONFIG);
        assertThat(check.err()).contains("2 configuration error(s); not starting")
            .contains("appliance.api.listen: cannot create a socket in /proc/self")
            .contains("appliance.metrics.listen: cannot listen on 192.0.2.77:9741: no interface of this host has " +
                "that address");
        final Run start = run("daemon", "--config", file.toString(), "--no-dataplane");
        assertThat(start.status()).as("start refuses it the same way").isEqualTo(DaemonCommand.EXIT_CONFIG);
    }

    @Test
    void shouldRefuseAtCheckASocketPathStartWouldRefuse(@TempDir final Path dir) throws Exception
    {
        // A regular file where the socket goes (start deletes only a stale socket) and a path too long for a
        // socket address: both passed --check and then failed the start (issue 29).
        final Path file = Files.writeString(dir.resolve("api.sock"), "keep me");
        final Path tooLong = dir.resolve("m".repeat(120) + ".sock");
        final Path config = dir.resolve("sockets.yaml");
        Files.writeString(config, CONFIG
            .replace("api: { listen: \"127.0.0.1:0\", tokenFile: \"/tmp/netreduce-test-api.token\" }",
                "api: { listen: \"unix:" + file + "\" }")
            .replace("metrics: { listen: \"127.0.0.1:0\" }", "metrics: { listen: \"unix:" + tooLong + "\" }"));

        final Run check = run("daemon", "--config", config.toString(), "--check");

        assertThat(check.status()).isEqualTo(DaemonCommand.EXIT_CONFIG);
        assertThat(check.err()).contains("2 configuration error(s); not starting")
            .contains("appliance.api.listen: " + file + " exists and is not a socket")
            .contains("appliance.metrics.listen: the path is " + tooLong.toString().length() + " bytes; a Unix " +
                "socket's path holds at most 107");
        assertThat(Files.readString(file)).isEqualTo("keep me");
    }

    @Test
    void shouldRefuseAtCheckATokenFileOthersCanRead(@TempDir final Path dir) throws Exception
    {
        final Path token = Files.writeString(dir.resolve("api.token"), "0123456789abcdef0123456789abcdef\n");
        Files.setPosixFilePermissions(token, java.nio.file.attribute.PosixFilePermissions.fromString("rw-r--r--"));
        final Path file = dir.resolve("token.yaml");
        Files.writeString(file, CONFIG.replace("/tmp/netreduce-test-api.token", token.toString()));

        final Run check = run("daemon", "--config", file.toString(), "--check");

        assertThat(check.status()).isEqualTo(DaemonCommand.EXIT_CONFIG);
        assertThat(check.err()).contains("appliance.api.tokenFile: API token file " + token + " has mode rw-r--r--");
    }

    @Test
    void shouldExitWithTheConfigurationStatusWhenStartCannotListenWhereTheConfigurationSays(@TempDir final Path dir)
        throws Exception
    {
        // Without the host checks (--skip-interface-check) the bind itself fails at start: the configuration is at
        // fault, so the status is the one the unit does not restart on (RestartPreventExitStatus=2), not 1.
        final Path file = dir.resolve("unbindable.yaml");
        Files.writeString(file, CONFIG.replace(
            "api: { listen: \"127.0.0.1:0\", tokenFile: \"/tmp/netreduce-test-api.token\" }",
            "api: { listen: \"unix:/proc/self/x.sock\" }"));

        final Run start = run("daemon", "--config", file.toString(), "--skip-interface-check", "--no-dataplane");

        assertThat(start.status()).isEqualTo(DaemonCommand.EXIT_CONFIG);
        assertThat(start.err()).startsWith("netreduce: cannot start: ")
            .contains("appliance.api.listen: cannot listen on unix:/proc/self/x.sock")
            .contains("the configuration is at fault");
    }

    @Test
    void shouldSkipTheInterfaceCheckOnlyWhenAsked(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("elsewhere.yaml");
        Files.writeString(file, CONFIG.replace("name: lo", "name: nr-missing0"));

        assertThat(run("daemon", "--config", file.toString(), "--check").status()).isEqualTo(2);
        final Run skipped = run("daemon", "--config", file.toString(), "--check", "--skip-interface-check");
        assertThat(skipped.status()).isZero();
        assertThat(skipped.out()).contains("valid (2 job(s), 2 ring(s))");
    }

    @Test
    void shouldServeApiAndMetricsAndReloadOnlyTheChangedRing(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("netreduce.yaml");
        Files.writeString(file, CONFIG);
        final List<String> dataplaneCommands = new ArrayList<>();
        final RecordingAttachment recording = new RecordingAttachment(new RingInstaller()
        {
            @Override
            public void install(final RingRef ring)
            {
                dataplaneCommands.add("install " + ring.job() + "/" + ring.ring().id());
            }

            @Override
            public void remove(final RingRef ring)
            {
                dataplaneCommands.add("remove " + ring.job() + "/" + ring.ring().id());
            }
        });
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.ON_THIS_HOST);

        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.ON_THIS_HOST),
                ValidationOptions.ON_THIS_HOST, recording);
            ApiClient api = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5), Daemon.apiToken());
            ApiClient metrics = new ApiClient(daemon.metricsAddress(), Duration.ofSeconds(5)))
        {
            assertThat(dataplaneCommands).containsExactly("install a/1", "install b/2");
            assertThat(api.send("GET", "/v1/jobs/b", null, null).status()).isEqualTo(200);

            Files.writeString(file, CONFIG.replace("window: 4", "window: 8"));
            dataplaneCommands.clear();
            assertThat(daemon.reload()).isNotNull();
            assertThat(dataplaneCommands).containsExactly("remove b/2", "install b/2");

            Files.writeString(file, CONFIG.replace("ip: 10.0.0.2", "ip: 10.0.0.1"));
            dataplaneCommands.clear();
            assertThat(daemon.reload()).isNull();
            assertThat(dataplaneCommands).isEmpty();
            assertThat(daemon.config().job("b").orElseThrow().rings().getFirst().window()).isEqualTo(8);

            final String scrape = metrics.send("GET", "/metrics", null, null).body();
            assertThat(scrape).contains("netreduce_config_reloads_total{result=\"applied\"} 1.0")
                .contains("netreduce_config_reloads_total{result=\"refused\"} 1.0")
                .contains("netreduce_ring_world_size{job=\"b\",ring=\"2\"} 2.0")
                .contains("netreduce_test_frames_total{port=\"lo\"} 5.0");
        }
        assertThat(recording.close).isTrue();
    }

    @Test
    void shouldAnswerRingParametersAndHealthWithoutATokenAndNothingElse(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("netreduce.yaml");
        Files.writeString(file, CONFIG);
        final NetreduceConfig config = ConfigLoader.load(file, ValidationOptions.ON_THIS_HOST);
        final RecordingAttachment recording = new RecordingAttachment(new RingInstaller()
        {
            @Override
            public void install(final RingRef ring)
            {
            }

            @Override
            public void remove(final RingRef ring)
            {
            }
        });
        try (Daemon daemon = Daemon.start(config, () -> ConfigLoader.load(file, ValidationOptions.ON_THIS_HOST),
                ValidationOptions.ON_THIS_HOST, recording);
            ApiClient member = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5));
            ApiClient owner = new ApiClient(daemon.apiAddress(), Duration.ofSeconds(5), Daemon.apiToken()))
        {
            // What a ring's member on another host must read before it sends, with no token: the daemon's wiring.
            final ApiClient.Response parameters = member.send("GET", "/v1/rings/1/parameters", null, null);
            assertThat(parameters.status()).isEqualTo(200);
            assertThat(parameters.body()).contains("\"window\":8").contains("\"msgLen\":16");
            assertThat(member.send("GET", "/v1/health", null, null).status()).isEqualTo(200);
            // Everything else needs the token: reads of the configuration and every change.
            assertThat(member.send("GET", "/v1/rings/1", null, null).status()).isEqualTo(401);
            assertThat(member.send("GET", "/v1/jobs", null, null).status()).isEqualTo(401);
            assertThat(member.send("DELETE", "/v1/jobs/a", null, null).status()).isEqualTo(401);
            assertThat(member.send("POST", "/v1/rings/1/parameters", "{}", "application/json").status())
                .isNotEqualTo(200);
            assertThat(owner.send("GET", "/v1/jobs", null, null).status()).isEqualTo(200);
            assertThat(daemon.config().job("a")).isPresent();
        }
    }

    /** A stand-in dataplane for the daemon's wiring: records ring commands, publishes one counter. */
    static final class RecordingAttachment implements DataplaneAttachment
    {
        private final RingInstaller installer;
        boolean close;

        RecordingAttachment(final RingInstaller installer)
        {
            this.installer = installer;
        }

        @Override
        public RingInstaller installer()
        {
            return installer;
        }

        @Override
        public io.netreduce.controlplane.metrics.MetricsSource metrics()
        {
            return sink -> sink.counter("netreduce_test_frames", "Frames seen by the test.", 5, "port", "lo");
        }

        @Override
        public io.netreduce.controlplane.api.ApplianceControl control(
            final io.netreduce.controlplane.api.ConfiguredAppliance configured)
        {
            return configured;
        }

        @Override
        public void close()
        {
            close = true;
        }
    }
}
