package io.netreduce.daemon;

import io.netreduce.controlplane.api.ConfiguredAppliance;
import io.netreduce.controlplane.api.ControlApi;
import io.netreduce.controlplane.api.HttpEndpoint;
import io.netreduce.controlplane.api.RingInstaller;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.ListenAddress;
import io.netreduce.controlplane.config.ValidationOptions;
import io.netty.util.internal.MacAddressUtil;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import java.util.stream.Collectors;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The launcher script (aggregator-daemon/src/main/dist/netreduce) and what {@code netreduce ctl} prints on stderr:
 * nothing but its own errors, so that scripts can read it (issue 29: every call printed the JVM's incubator-module
 * warning and, in a namespace without a hardware address, Netty's MacAddressUtil warning).
 */
class LauncherTest
{
    private static final Path ROOT = Path.of(System.getProperty("netreduce.repo.root", "..")).toAbsolutePath().normalize();
    private static final Path LAUNCHER = ROOT.resolve("aggregator-daemon/src/main/dist/netreduce");
    private static final String VECTOR = "--add-modules jdk.incubator.vector";

    record Result(int status, String out, String err)
    {
    }

    /** netreduce.jvm.flags from the parent pom, as the build fills them into the launcher. */
    private static String jvmFlags() throws IOException
    {
        final java.util.regex.Matcher flags = java.util.regex.Pattern
            .compile("<netreduce.jvm.flags>([^<]+)</netreduce.jvm.flags>").matcher(Files.readString(ROOT.resolve("pom.xml")));
        assertThat(flags.find()).as("netreduce.jvm.flags in the parent pom").isTrue();
        assertThat(flags.group(1)).contains(VECTOR);
        return flags.group(1).trim();
    }

    /** The launcher as the build makes it: the flags from the parent pom filled in. */
    private static Path launcher(final Path dir) throws IOException
    {
        final String flags = jvmFlags();
        final Path script = dir.resolve("netreduce");
        Files.writeString(script, Files.readString(LAUNCHER).replace("@netreduce.jvm.flags@", flags));
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwx------"));
        return script;
    }

    private static Result run(final List<String> command, final Path dir, final String... env)
        throws IOException, InterruptedException
    {
        final ProcessBuilder builder = new ProcessBuilder(command)
            .redirectOutput(dir.resolve("out.txt").toFile()).redirectError(dir.resolve("err.txt").toFile());
        builder.environment().remove("NETREDUCE_JAVA_OPTS");
        builder.environment().remove("JAVA_TOOL_OPTIONS");
        builder.environment().remove("JDK_JAVA_OPTIONS");
        for (int i = 0; i < env.length; i += 2)
        {
            builder.environment().put(env[i], env[i + 1]);
        }
        final Process process = builder.start();
        assertThat(process.waitFor(120, TimeUnit.SECONDS)).as("finished").isTrue();
        return new Result(process.exitValue(), Files.readString(dir.resolve("out.txt")),
            Files.readString(dir.resolve("err.txt")));
    }

    /** What every command gets for its start-up (the class-file API's JIT thresholds; LauncherAotTest). */
    private static final List<String> START_UP = List.of("-XX:CompileCommand=quiet",
        "-XX:CompileCommand=CompileThresholdScaling,jdk.internal.classfile.*::*,100.0",
        "-XX:CompileCommand=CompileThresholdScaling,java.lang.classfile.*::*,100.0");

    /** The daemon's (and the workers') transmit flush and idle wait stay out of its duty cycle's compiled code. */
    private static final String FLUSH_OUT_OF_LINE =
        "-XX:CompileCommand=dontinline,io.netreduce.protocol.port.TpacketV2TxRing::flush";
    private static final String AWAIT_OUT_OF_LINE =
        "-XX:CompileCommand=dontinline,io.netreduce.protocol.port.PortPoller::await";

    @Test
    void shouldGiveTheVectorModuleToTheDaemonAndWorkersOnlyTrimTheDaemonsCHeapAndPassEverythingElseThrough(@TempDir final Path dir) throws Exception
    {
        // A stand-in java that says it is 25 and prints the arguments it was given.
        final Path home = Files.createDirectories(dir.resolve("jdk/bin"));
        final Path java = home.resolve("java");
        Files.writeString(java, """
            #!/bin/sh
            if [ "$1" = -version ]; then echo 'openjdk version "25.0.1" 2025-10-21' >&2; exit 0; fi
            printf '%s\\n' "$@"
            echo "MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-unset}" >&2
            """);
        Files.setPosixFilePermissions(java, PosixFilePermissions.fromString("rwx------"));
        final Path jar = Files.writeString(dir.resolve("netreduce.jar"), "");
        final Path script = launcher(dir);
        final String[] env = { "JAVA_HOME", dir.resolve("jdk").toString(), "NETREDUCE_JAR", jar.toString(),
            "NETREDUCE_JAVA_OPTS", "-Xmx64m" };

        final String flags = jvmFlags();
        final List<String> withVector = Arrays.asList(flags.split(" +"));
        final List<String> withoutVector = Arrays.asList(flags.replace(VECTOR, "").trim().split(" +"));
        for (final List<String> args : List.of(List.of("daemon", "--config", "/etc/netreduce/netreduce.yaml"),
            List.of("pcap", "verify", "x.pcap"), List.of("--help"), List.of("--version")))
        {
            final Result result = run(concat(List.of(script.toString()), args), dir, env);
            assertThat(result.status()).isZero();
            // The daemon alone trims the C heap periodically (freed aggregator memory back to the system); only it
            // (and the worker commands) uses the Vector API, so only it gets the incubating module and its warning.
            final List<String> jvm = args.get(0).equals("daemon") ?
                concat(withVector, List.of("-XX:TrimNativeHeapInterval=60000"), START_UP,
                    List.of(FLUSH_OUT_OF_LINE, AWAIT_OUT_OF_LINE)) :
                concat(withoutVector, START_UP);
            assertThat(result.out().lines().toList()).as("java's arguments for %s", args)
                .isEqualTo(concat(jvm, List.of("-Xmx64m", "-jar", jar.toString()), args));
            // The daemon alone runs with two malloc arenas (docs/operations.md, "Soak").
            assertThat(result.err()).as("java's environment for %s", args)
                .contains(args.get(0).equals("daemon") ? "MALLOC_ARENA_MAX=2" : "MALLOC_ARENA_MAX=unset");
        }
        final List<String> ctl = List.of("ctl", "--api", "unix:/run/netreduce/api.sock", "jobs");
        final Result result = run(concat(List.of(script.toString()), ctl), dir, env);
        assertThat(result.status()).isZero();
        assertThat(result.out().lines().toList()).as("java's arguments for ctl")
            .isEqualTo(concat(withoutVector, START_UP, List.of("-Xmx64m", "-jar", jar.toString()), ctl))
            .doesNotContain("jdk.incubator.vector");
        // A worker command (its own jar) uses the Vector API too (its result checks, SwitchML's quantiser): it keeps it.
        final Result worker = run(List.of(script.toString(), "worker", "allreduce", "--help"), dir,
            concat(Arrays.asList(env), List.of("NETREDUCE_WORKER_JAR", jar.toString())).toArray(String[]::new));
        assertThat(worker.status()).isZero();
        assertThat(String.join(" ", worker.out().lines().toList())).as("java's arguments for worker allreduce")
            .contains(VECTOR);
    }

    @Test
    void shouldGiveNettyAMachineIdItAcceptsAndKeepOneThatWasSet()
    {
        final String before = System.getProperty(NetreduceMain.NETTY_MACHINE_ID);
        try
        {
            System.clearProperty(NetreduceMain.NETTY_MACHINE_ID);
            NetreduceMain.quietNettyMachineId();
            final String id = System.getProperty(NetreduceMain.NETTY_MACHINE_ID);
            assertThat(id).matches("([0-9a-f]{2}:){7}[0-9a-f]{2}");
            final byte[] parsed = MacAddressUtil.parseMAC(id);
            assertThat(parsed).hasSize(8);
            assertThat(parsed[0] & 0x03).as("locally administered, unicast").isEqualTo(0x02);

            System.setProperty(NetreduceMain.NETTY_MACHINE_ID, "02:00:00:00:00:07");
            NetreduceMain.quietNettyMachineId();
            assertThat(System.getProperty(NetreduceMain.NETTY_MACHINE_ID)).isEqualTo("02:00:00:00:00:07");
        }
        finally
        {
            if (before == null)
            {
                System.clearProperty(NetreduceMain.NETTY_MACHINE_ID);
            }
            else
            {
                System.setProperty(NetreduceMain.NETTY_MACHINE_ID, before);
            }
        }
    }

    /**
     * The real thing: the launcher runs the real JVM on {@code ctl jobs} against an API on a Unix socket. As root
     * with {@code unshare}, in a network namespace of its own with only {@code lo} (no hardware address: where
     * Netty warned), the socket reached through the file system.
     */
    @Test
    void shouldPrintNothingOnStderrForASuccessfulCtlCall(@TempDir final Path dir) throws Exception
    {
        final Path socket = dir.resolve("api.sock");
        final ConfiguredAppliance appliance = new ConfiguredAppliance(ConfigLoader.parse(DaemonTest.CONFIG),
            () -> ConfigLoader.parse(DaemonTest.CONFIG), RingInstaller.NONE, ValidationOptions.DOCUMENT_ONLY);
        try (HttpEndpoint endpoint = HttpEndpoint.start("launcher-test", ListenAddress.parse("unix:" + socket),
            new ControlApi(appliance)))
        {
            final Path script = launcher(dir);
            final List<String> command = new ArrayList<>();
            final boolean isolated = canUnshareTheNetwork(dir);
            if (isolated)
            {
                command.addAll(List.of("unshare", "--net"));
            }
            command.addAll(List.of(script.toString(), "ctl", "--api", "unix:" + socket, "jobs"));

            final Result result = run(command, dir, "NETREDUCE_JAR", classPathJar(dir).toString(),
                "JAVA_HOME", System.getProperty("java.home"));

            assertThat(result.err()).as("stderr of ctl (own network namespace: %s)", isolated).isEmpty();
            assertThat(result.status()).isZero();
            assertThat(result.out()).contains("a", "b");
        }
    }

    private static boolean canUnshareTheNetwork(final Path dir) throws IOException, InterruptedException
    {
        try
        {
            return run(List.of("unshare", "--net", "true"), dir).status() == 0;
        }
        catch (final IOException ex)
        {
            return false;
        }
    }

    /**
     * A jar of nothing but a manifest whose Class-Path is this test's class path, so that the launcher's
     * {@code java -jar} runs the classes under test.
     */
    private static Path classPathJar(final Path dir) throws IOException
    {
        final Manifest manifest = new Manifest();
        final Attributes main = manifest.getMainAttributes();
        main.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        main.put(Attributes.Name.MAIN_CLASS, NetreduceMain.class.getName());
        main.put(Attributes.Name.CLASS_PATH, Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
            .map(entry -> Path.of(entry).toAbsolutePath().toUri().toString())
            .collect(Collectors.joining(" ")));
        main.put(new Attributes.Name("Enable-Native-Access"), "ALL-UNNAMED");
        final Path jar = dir.resolve("classpath.jar");
        try (OutputStream out = Files.newOutputStream(jar); JarOutputStream ignored = new JarOutputStream(out, manifest))
        {
            // the manifest is all
        }
        return jar;
    }

    @SafeVarargs
    private static List<String> concat(final List<String>... lists)
    {
        final List<String> all = new ArrayList<>();
        for (final List<String> list : lists)
        {
            all.addAll(list);
        }
        return all;
    }
}
