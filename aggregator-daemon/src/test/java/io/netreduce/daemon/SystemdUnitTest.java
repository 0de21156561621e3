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
    void verifierShouldFlagABrokenDirectiveSoTheCheckAboveMeansSomething(@TempDir final Path dir) throws Exception
    {
        assumeTrue(hasSystemdAnalyze(), "systemd-analyze not installed (scripts/setup.sh installs it)");

        final Result result = verify(dir, Files.readString(UNIT).replace("ProtectSystem=strict", "ProtectSystem=wrong"));

        assertThat(result.output()).contains("protect system value", "wrong");
    }

    @Test
    void shouldBeRatedAtMostTwoPointFiveBySystemdAnalyzeSecurity(@TempDir final Path dir) throws Exception
    {
        assumeTrue(hasSystemdAnalyze(), "systemd-analyze not installed (scripts/setup.sh installs it)");
        final Path unit = dir.resolve("netreduce.service");
        Files.copy(UNIT, unit);
        final Process process = new ProcessBuilder("systemd-analyze", "security", "--offline=true", "--no-pager",
            unit.toString()).redirectErrorStream(true).start();
        final String output = new String(process.getInputStream().readAllBytes());
        process.waitFor();
        final java.util.regex.Matcher level = java.util.regex.Pattern
            .compile("Overall exposure level for netreduce.service: ([0-9.]+)").matcher(output);
        assertThat(level.find()).as(output).isTrue();
        assertThat(Double.parseDouble(level.group(1))).as("exposure (10 = unprotected)").isLessThanOrEqualTo(2.5);
        final String text = Files.readString(UNIT);
        assertThat(text).contains("SystemCallFilter=@system-service", "SystemCallFilter=setpriority", "ProcSubset=pid",
            "PrivateMounts=yes", "IPAddressDeny=any", "IPAddressAllow=localhost");
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
