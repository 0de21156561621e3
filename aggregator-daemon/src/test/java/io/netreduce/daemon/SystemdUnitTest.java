package io.netreduce.daemon;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Checks systemd/netreduce.service with {@code systemd-analyze verify} (scripts/setup.sh installs systemd). The
 * verifier requires ExecStart's binary to exist, so the unit is verified as a copy whose /opt/netreduce path
 * points at the launcher in this repository.
 */
class SystemdUnitTest
{
    private static final Path ROOT = Path.of(System.getProperty("netreduce.repo.root", "..")).toAbsolutePath().normalize();
    private static final Path UNIT = ROOT.resolve("systemd/netreduce.service");
    private static final Path LAUNCHER = ROOT.resolve("aggregator-daemon/src/main/dist/netreduce");

    record Result(int status, String output)
    {
    }

    private static Result verify(final Path dir, final String unitText) throws IOException, InterruptedException
    {
        final Path unit = dir.resolve("netreduce.service");
        Files.writeString(unit, unitText.replace("/opt/netreduce/bin/netreduce", LAUNCHER.toString()));
        final Process process = new ProcessBuilder("systemd-analyze", "verify", "--man=no", unit.toString())
            .redirectErrorStream(true).start();
        final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return new Result(process.exitValue(), output);
    }

    private static boolean hasSystemdAnalyze()
    {
        return List.of("/usr/bin/systemd-analyze", "/bin/systemd-analyze").stream().anyMatch(p -> Files.isExecutable(Path.of(p)));
    }

    @Test
    void shouldPassSystemdAnalyzeVerifyWithoutAnyWarning(@TempDir final Path dir) throws Exception
    {
        assumeTrue(hasSystemdAnalyze(), "systemd-analyze not installed (scripts/setup.sh installs it)");
        assertThat(Files.isExecutable(LAUNCHER)).as("launcher is executable").isTrue();

        final Result result = verify(dir, Files.readString(UNIT));

        assertThat(result.output()).isEmpty();
        assertThat(result.status()).isZero();
    }

    @Test
    void shouldPassSystemdAnalyzeVerifyForTheSidecarAgentUnit(@TempDir final Path dir) throws Exception
    {
        assumeTrue(hasSystemdAnalyze(), "systemd-analyze not installed (scripts/setup.sh installs it)");
        // A template: verified as an instance, its launcher path pointed at this repository's.
        final Path unit = dir.resolve("netreduce-agent@eth0.service");
        Files.writeString(unit, Files.readString(ROOT.resolve("systemd/netreduce-agent@.service"))
            .replace("/opt/netreduce/bin/netreduce", LAUNCHER.toString()));
        final Process process = new ProcessBuilder("systemd-analyze", "verify", "--man=no", unit.toString())
            .redirectErrorStream(true).start();
        final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();

        assertThat(output).isEmpty();
        assertThat(process.exitValue()).isZero();
        assertThat(Files.readString(unit)).contains("worker agent --dev %i --socket /run/netreduce-agent-%i/agent.sock",
            "AmbientCapabilities=CAP_NET_RAW", "RuntimeDirectoryMode=0700");
    }

    @Test
    void verifierShouldFlagABrokenDirectiveSoTheCheckAboveMeansSomething(@TempDir final Path dir) throws Exception
    {
        assumeTrue(hasSystemdAnalyze(), "systemd-analyze not installed (scripts/setup.sh installs it)");

        final Result result = verify(dir, Files.readString(UNIT).replace("ProtectSystem=strict", "ProtectSystem=wrong"));

        assertThat(result.output()).contains("protect system value", "wrong");
    }

    private static final Path DROP_IN = ROOT.resolve("systemd/af-xdp.conf");
    private static final Path OPERATIONS = ROOT.resolve("docs/operations.md");

    /** systemd-analyze security's score for the unit in {@code dir} (offline: nothing installed). */
    private static double exposure(final Path dir) throws IOException, InterruptedException
    {
        final Process process = new ProcessBuilder("systemd-analyze", "security", "--offline=true", "--no-pager",
            "netreduce.service").directory(dir.toFile()).redirectErrorStream(true).start();
        final String output = new String(process.getInputStream().readAllBytes());
        process.waitFor();
        final java.util.regex.Matcher level = java.util.regex.Pattern
            .compile("Overall exposure level for netreduce.service: ([0-9.]+)").matcher(output);
        assertThat(level.find()).as(output).isTrue();
        return Double.parseDouble(level.group(1));
    }

    /** The score docs/operations.md states after {@code phrase} in bold, e.g. "rates the unit **1.8**". */
    private static double documented(final String phrase) throws IOException
    {
        final java.util.regex.Matcher score = java.util.regex.Pattern
            .compile(java.util.regex.Pattern.quote(phrase) + " \\*\\*([0-9.]+)\\*\\*")
            .matcher(Files.readString(OPERATIONS));
        assertThat(score.find()).as("docs/operations.md states '%s **N**'", phrase).isTrue();
        return Double.parseDouble(score.group(1));
    }

    @Test
    void shouldBeRatedBySystemdAnalyzeSecurityAsTheDocsSay(@TempDir final Path dir) throws Exception
    {
        // The docs said 1.7 while the unit (with setpriority allowed back, which systemd counts as @resources) was
        // 1.8; a real systemd in a VM showed 1.8 too (issue 29). The number in the docs is now checked.
        assumeTrue(hasSystemdAnalyze(), "systemd-analyze not installed (scripts/setup.sh installs it)");
        Files.copy(UNIT, dir.resolve("netreduce.service"));

        final double score = exposure(dir);

        assertThat(score).as("exposure (10 = unprotected)").isLessThanOrEqualTo(2.5)
            .isEqualTo(documented("`systemd-analyze security` rates the unit"));
        final String text = Files.readString(UNIT);
        assertThat(text).contains("SystemCallFilter=@system-service", "SystemCallFilter=setpriority", "ProcSubset=pid",
            "PrivateMounts=yes", "IPAddressDeny=any", "IPAddressAllow=localhost");
    }

    @Test
    void shouldAddOnlyWhatAnAfXdpPortNeedsInTheDropIn(@TempDir final Path dir) throws Exception
    {
        assumeTrue(hasSystemdAnalyze(), "systemd-analyze not installed (scripts/setup.sh installs it)");
        final Path dropIns = Files.createDirectories(dir.resolve("netreduce.service.d"));
        Files.copy(DROP_IN, dropIns.resolve("af-xdp.conf"));

        final Result verified = verify(dir, Files.readString(UNIT));
        assertThat(verified.output()).isEmpty();
        assertThat(verified.status()).isZero();
        Files.copy(UNIT, dir.resolve("netreduce.service"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        assertThat(exposure(dir)).isEqualTo(documented("with the drop-in it rates"));

        final List<String> lines = Files.readAllLines(DROP_IN).stream().map(String::strip)
            .filter(line -> !line.isEmpty() && !line.startsWith("#")).toList();
        assertThat(lines).containsExactly("[Service]", "AmbientCapabilities=CAP_BPF", "CapabilityBoundingSet=CAP_BPF",
            "RestrictAddressFamilies=AF_XDP", "SystemCallFilter=bpf", "LimitMEMLOCK=64M");
    }

    @Test
    void shouldGrantOnlyRawAndAdminNetworkCapabilitiesAndLetTheJvmJit() throws IOException
    {
        final List<String> lines = Files.readAllLines(UNIT).stream().map(String::strip)
            .filter(line -> !line.startsWith("#")).toList();

        assertThat(lines).contains(
            "AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN",
            "CapabilityBoundingSet=CAP_NET_RAW CAP_NET_ADMIN",
            "LimitNICE=-10",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "RestrictAddressFamilies=AF_PACKET AF_INET AF_INET6 AF_UNIX AF_NETLINK",
            "ExecReload=/bin/kill -HUP $MAINPID",
            "Restart=on-failure");
        assertThat(lines).noneMatch(line -> line.startsWith("MemoryDenyWriteExecute"));
    }
}
