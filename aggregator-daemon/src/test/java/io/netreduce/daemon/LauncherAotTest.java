package io.netreduce.daemon;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import javax.tools.ToolProvider;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The launcher (src/main/dist/netreduce) and the JVMs' ahead-of-time caches: which cache it hands the JVM (a stand-in
 * {@code java} that prints its arguments); with the real JVM, that a cache made through the launcher is used, that a
 * cache the JVM refuses leaves the output as it is without one, and that a cache is never used with a jar other than
 * the one it was trained on (JDK 25 would run the old jar's classes: JDK-8377932); and scripts/aot-train.sh's
 * freshness check.
 */
class LauncherAotTest
{
    private static final Path ROOT = Path.of(System.getProperty("netreduce.repo.root", "..")).toAbsolutePath().normalize();
    private static final Path SOURCE = ROOT.resolve("aggregator-daemon/src/main/dist/netreduce");
    private static final String FLAGS = System.getProperty("netreduce.jvm.flags",
        "--enable-native-access=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED " +
        "--add-modules jdk.incubator.vector");
    private static final Path JAVA_HOME = Path.of(System.getProperty("java.home"));

    record Result(int status, String out, String err)
    {
    }

    @TempDir
    Path dir;
    private Path bin;
    private Path launcher;
    private Path jar;
    private Path workerJar;

    @BeforeEach
    void install() throws Exception
    {
        bin = Files.createDirectories(dir.resolve("bin"));
        launcher = bin.resolve("netreduce");
        Files.writeString(launcher, Files.readString(SOURCE).replace("@netreduce.jvm.flags@", FLAGS));
        Files.setPosixFilePermissions(launcher, PosixFilePermissions.fromString("rwxr-xr-x"));
        jar = bin.resolve("netreduce.jar");
        workerJar = bin.resolve("netreduce-worker.jar");
        writeJar(jar, "v1");
        writeJar(workerJar, "worker");
        aged(jar);
        aged(workerJar);
    }

    // -- which cache: a stand-in java --------------------------------------------------------------------------------

    @Test
    void shouldRunWithoutACacheWhenThereIsNone() throws Exception
    {
        assertThat(argsOf(Map.of(), "daemon", "--config", "x.yaml")).noneMatch(a -> a.startsWith("-XX:AOT"))
            .containsSubsequence("-jar", jar.toString(), "daemon", "--config", "x.yaml");
    }

    @Test
    void shouldUseTheCommandsCacheWhileItsStampMatchesTheJarAndTheCache() throws Exception
    {
        final Path cache = cache("netreduce-daemon.aot", jar);

        final List<String> args = argsOf(Map.of(), "daemon", "--config", "x.yaml");

        assertThat(args).containsSubsequence("-XX:AOTMode=auto", "-XX:AOTCache=" + cache, "-Xlog:aot*=off",
            "-Xlog:cds*=off", "-jar", jar.toString(), "daemon");
        assertThat(args.indexOf("-XX:AOTCache=" + cache)).isGreaterThan(args.indexOf("--enable-native-access=ALL-UNNAMED"));
    }

    @Test
    void shouldPickTheWorkerSubcommandsCacheBesideTheWorkerJar() throws Exception
    {
        final Path serve = cache("netreduce-worker-serve.aot", workerJar);

        assertThat(argsOf(Map.of(), "worker", "serve", "--dev", "eth0"))
            .contains("-XX:AOTCache=" + serve).containsSubsequence("-jar", workerJar.toString(), "serve");
        assertThat(argsOf(Map.of(), "worker", "write-bw")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    @Test
    void shouldNotUseACacheWithoutItsStamp() throws Exception
    {
        Files.delete(cache("netreduce-daemon.aot", jar).resolveSibling("netreduce-daemon.aot.stamp"));

        assertThat(argsOf(Map.of(), "daemon")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    @Test
    void shouldNotUseACacheWhoseJarWasReplacedEvenByAnOlderOne() throws Exception
    {
        cache("netreduce-ctl.aot", jar);
        writeJar(jar, "v2, another build");
        Files.setLastModifiedTime(jar, FileTime.from(Instant.now().minusSeconds(3600)));   // as cp -p or tar leave it

        assertThat(argsOf(Map.of(), "ctl", "rings")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    @Test
    void shouldNotUseACacheThatWasReplaced() throws Exception
    {
        final Path cache = cache("netreduce-daemon.aot", jar);
        Files.writeString(cache, "another cache");

        assertThat(argsOf(Map.of(), "daemon")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    @Test
    void shouldUseNoCacheWhenToldNot() throws Exception
    {
        cache("netreduce-daemon.aot", jar);

        assertThat(argsOf(Map.of("NETREDUCE_AOT", "off"), "daemon")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    @Test
    void shouldLookInTheCacheDirectoryWhenOneIsNamed() throws Exception
    {
        final Path elsewhere = Files.createDirectories(dir.resolve("cache"));
        final Path cache = cache(elsewhere.resolve("netreduce-daemon.aot"), jar);

        assertThat(argsOf(Map.of("NETREDUCE_AOT_DIR", elsewhere.toString()), "daemon")).contains("-XX:AOTCache=" + cache);
    }

    @Test
    void shouldAskTheJvmToWriteTheCacheInATrainingRun() throws Exception
    {
        cache("netreduce-daemon.aot", jar);

        final List<String> args = argsOf(Map.of("NETREDUCE_AOT_OUTPUT", "/tmp/x.aot"), "daemon");

        assertThat(args).contains("-XX:AOTCacheOutput=/tmp/x.aot").noneMatch(a -> a.startsWith("-XX:AOTCache="));
    }

    @Test
    void shouldPrintWhereTheCacheOfACommandIs() throws Exception
    {
        final Result result = run(fakeJava(), Map.of("NETREDUCE_AOT", "print"), "worker", "serve");

        assertThat(result.status()).isZero();
        assertThat(result.out()).isEqualTo(bin.resolve("netreduce-worker-serve.aot") + "\n" + workerJar + "\n");
    }

    // -- the real JVM ----------------------------------------------------------------------------------------------

    @Test
    void shouldMakeACacheThroughTheLauncherAndLoadClassesFromIt() throws Exception
    {
        final Path cache = train("netreduce-daemon.aot", jar, "daemon");

        final Result used = run(JAVA_HOME, Map.of("NETREDUCE_JAVA_OPTS", "-Xlog:class+load=info:file=" +
            dir.resolve("classes.log")), "daemon", "run");
        assertThat(used.status()).isZero();
        assertThat(used.out()).isEqualTo("v1 daemon run\n");
        assertThat(Files.readString(dir.resolve("classes.log"))).contains("AotProbe source: shared objects file");

        final Result without = run(JAVA_HOME, Map.of("NETREDUCE_AOT", "off", "NETREDUCE_JAVA_OPTS",
            "-Xlog:class+load=info:file=" + dir.resolve("classes-off.log")), "daemon", "run");
        assertThat(without.out()).isEqualTo("v1 daemon run\n");
        assertThat(Files.readString(dir.resolve("classes-off.log"))).doesNotContain("AotProbe source: shared objects file");
        assertThat(cache).isNotEmptyFile();
    }

    @Test
    void shouldRunTheNewJarsClassesAfterTheJarWasReplaced() throws Exception
    {
        train("netreduce-daemon.aot", jar, "daemon");
        assertThat(run(JAVA_HOME, Map.of(), "daemon").out()).isEqualTo("v1 daemon\n");

        // another build of the jar, dated before the cache (cp -p, tar, a package): JDK 25 alone would run v1's class
        writeJar(jar, "v2");
        aged(jar);

        final Result result = run(JAVA_HOME, Map.of(), "daemon");
        assertThat(result.out()).isEqualTo("v2 daemon\n");
        assertThat(result.err().toLowerCase(Locale.ROOT)).doesNotContain("aot", "cds", "error", "shared");
    }

    @Test
    void shouldRunSilentlyWithoutACacheTheJvmRefuses() throws Exception
    {
        final Path cache = train("netreduce-daemon.aot", jar, "daemon");

        // ZGC: JDK 25 refuses a cache made under G1
        assertRunsAsWithout(Map.of("NETREDUCE_JAVA_OPTS", "-XX:+UseZGC"));

        // not a cache at all, stamped as if it were one
        Files.writeString(cache, "not a cache");
        writeStamp(cache, jar);
        assertRunsAsWithout(Map.of());
    }

    @Test
    void shouldDelayTheJitOfTheClassFileApiForEveryCommandAndSayNothingAboutIt() throws Exception
    {
        for (final String[] command : List.of(new String[] { "daemon" }, new String[] { "ctl", "rings" },
            new String[] { "worker", "serve" }))
        {
            assertThat(argsOf(Map.of(), command)).as(String.join(" ", command))
                .containsSubsequence("-XX:CompileCommand=quiet",
                    "-XX:CompileCommand=CompileThresholdScaling,jdk.internal.classfile.*::*,100.0",
                    "-XX:CompileCommand=CompileThresholdScaling,java.lang.classfile.*::*,100.0");
        }

        // the real JVM takes the commands, and prints none of them where scripts read the output
        final Result result = run(JAVA_HOME, Map.of("NETREDUCE_AOT", "off"), "daemon", "x");
        assertThat(result.status()).as(result.err()).isZero();
        assertThat(result.out()).isEqualTo("v1 daemon x\n");
        assertThat(result.err()).doesNotContain("CompileCommand", "CompileThresholdScaling");
    }

    @Test
    void shouldKeepTheEndpointsDutyCycleOutOfItsCallersForTheWorkerCommandsOnly() throws Exception
    {
        final String dontInline = "-XX:CompileCommand=dontinline,io.netreduce.host.rc.RcEndpoint::doWork";
        assertThat(argsOf(Map.of(), "worker", "serve", "--dev", "eth0")).containsSubsequence(
            "-XX:CompileCommand=quiet", dontInline);
        assertThat(argsOf(Map.of(), "worker", "allreduce")).contains(dontInline);
        assertThat(argsOf(Map.of(), "daemon")).doesNotContain(dontInline);
        assertThat(argsOf(Map.of(), "ctl", "rings")).doesNotContain(dontInline);

        // the real JVM takes it for a class it has not loaded, and says nothing
        final Result result = run(JAVA_HOME, Map.of("NETREDUCE_AOT", "off"), "worker", "serve");
        assertThat(result.status()).as(result.err()).isZero();
        assertThat(result.out()).isEqualTo("worker serve\n");
        assertThat(result.err()).doesNotContain("CompileCommand", "dontinline");
    }

    @Test
    void shouldKeepTheTransmitFlushAndTheIdleWaitOutOfTheDutyCyclesOfTheDaemonAndTheWorkers() throws Exception
    {
        final String flush = "-XX:CompileCommand=dontinline,io.netreduce.protocol.port.TpacketV2TxRing::flush";
        final String await = "-XX:CompileCommand=dontinline,io.netreduce.protocol.port.PortPoller::await";
        assertThat(argsOf(Map.of(), "daemon")).contains(flush, await);
        assertThat(argsOf(Map.of(), "worker", "serve", "--dev", "eth0")).contains(flush, await);
        assertThat(argsOf(Map.of(), "worker", "allreduce")).contains(flush, await);
        assertThat(argsOf(Map.of(), "ctl", "rings")).doesNotContain(flush, await);
    }

    @Test
    void shouldLetTheSidecarsC2InlineLessAndTheOptionsSetItBack() throws Exception
    {
        final String inline = "-XX:FreqInlineSize=50";
        assertThat(argsOf(Map.of(), "worker", "serve", "--dev", "eth0")).contains(inline);
        assertThat(argsOf(Map.of(), "worker", "allreduce")).doesNotContain(inline);
        assertThat(argsOf(Map.of(), "daemon")).doesNotContain(inline);
        // the user's options come later, and the JVM takes the last of a flag
        assertThat(argsOf(Map.of("NETREDUCE_JAVA_OPTS", "-XX:FreqInlineSize=325"), "worker", "serve"))
            .containsSubsequence(inline, "-XX:FreqInlineSize=325");

        final Result result = run(JAVA_HOME, Map.of("NETREDUCE_AOT", "off"), "worker", "serve");
        assertThat(result.status()).as(result.err()).isZero();
        assertThat(result.out()).isEqualTo("worker serve\n");
    }

    @Test
    void shouldRunTheSidecarOnTheSerialCollectorUnlessTheOptionsPickOne() throws Exception
    {
        assertThat(argsOf(Map.of(), "worker", "serve", "--dev", "eth0")).contains("-XX:+UseSerialGC");
        assertThat(argsOf(Map.of(), "worker", "allreduce")).doesNotContain("-XX:+UseSerialGC");
        assertThat(argsOf(Map.of(), "daemon")).doesNotContain("-XX:+UseSerialGC");

        // the JVM refuses two collectors: one the user picks is the only one
        assertThat(argsOf(Map.of("NETREDUCE_JAVA_OPTS", "-Xmx1g -XX:+UseZGC"), "worker", "serve"))
            .contains("-XX:+UseZGC").doesNotContain("-XX:+UseSerialGC");
        final Result result = run(JAVA_HOME, Map.of("NETREDUCE_AOT", "off", "NETREDUCE_JAVA_OPTS", "-XX:+UseG1GC"),
            "worker", "serve");
        assertThat(result.status()).as(result.err()).isZero();
        assertThat(result.out()).isEqualTo("worker serve\n");
    }

    private void assertRunsAsWithout(final Map<String, String> env) throws Exception
    {
        final Result result = run(JAVA_HOME, env, "daemon", "x");
        assertThat(result.status()).isZero();
        assertThat(result.out()).isEqualTo("v1 daemon x\n");
        assertThat(result.err().toLowerCase(Locale.ROOT)).doesNotContain("aot", "cds", "error", "shared");
    }

    // -- scripts/aot-train.sh's freshness check -------------------------------------------------------------------

    @Test
    void aotTrainShouldKeepTheCachesOfAJarRebuiltWithTheSameBytes() throws Exception
    {
        cache("netreduce-daemon.aot", jar);
        cache("netreduce-ctl.aot", jar);
        cache("netreduce-worker-allreduce.aot", workerJar);
        cache("netreduce-worker-serve.aot", workerJar);
        final String trainedOn = mtime(jar);
        assertThat(aotTrainCheck().out()).contains("every cache is up to date");

        // rebuilt, the same bytes: the jar's time goes back to the stamp's and the caches hold
        Files.write(jar, Files.readAllBytes(jar));
        final Result same = aotTrainCheck();
        assertThat(same.status()).as(same.out() + same.err()).isZero();
        assertThat(same.out()).contains("netreduce.jar rebuilt with the same bytes", "every cache is up to date");
        assertThat(mtime(jar)).isEqualTo(trainedOn);
        assertThat(argsOf(Map.of(), "daemon")).anyMatch(a -> a.startsWith("-XX:AOTCache="));

        // rebuilt from changed sources: stale, and the launcher leaves the caches out
        writeJar(jar, "v2");
        final Result changed = aotTrainCheck();
        assertThat(changed.status()).isEqualTo(1);
        assertThat(changed.out()).contains("stale or missing").contains("daemon").contains("ctl").doesNotContain("worker");
        assertThat(argsOf(Map.of(), "daemon")).noneMatch(a -> a.startsWith("-XX:AOT"));
    }

    private Result aotTrainCheck() throws Exception
    {
        final ProcessBuilder builder = new ProcessBuilder("bash", ROOT.resolve("scripts/aot-train.sh").toString(),
            "--check", "--launcher", launcher.toString());
        builder.environment().keySet().removeIf(k -> k.startsWith("NETREDUCE_"));
        builder.environment().put("NETREDUCE_WORKER_JAR", workerJar.toString());
        return finish(builder.start());
    }

    // -- helpers ---------------------------------------------------------------------------------------------------

    /**
     * A jar whose main class, AotProbe, prints {@code version} and its arguments: two versions are two builds whose
     * class differs, as a cache trained on one must not stand in for the other.
     */
    private static void writeJar(final Path path, final String version) throws IOException
    {
        final byte[] probe = PROBES.computeIfAbsent(version.split(",")[0], LauncherAotTest::compileProbe);
        final Manifest manifest = new Manifest();
        manifest.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        manifest.getMainAttributes().put(Attributes.Name.MAIN_CLASS, "AotProbe");
        try (OutputStream out = Files.newOutputStream(path);
            JarOutputStream jarOut = new JarOutputStream(out, manifest))
        {
            jarOut.putNextEntry(new JarEntry("AotProbe.class"));
            jarOut.write(probe);
            jarOut.closeEntry();
            jarOut.putNextEntry(new JarEntry("build.txt"));
            jarOut.write(version.getBytes(StandardCharsets.UTF_8));
            jarOut.closeEntry();
        }
    }

    private static final Map<String, byte[]> PROBES = new java.util.concurrent.ConcurrentHashMap<>();

    private static byte[] compileProbe(final String printed)
    {
        try
        {
            final Path src = Files.createTempDirectory("aot-probe");
            final Path java = src.resolve("AotProbe.java");
            Files.writeString(java, "public class AotProbe { public static void main(String[] a) { " +
                "System.out.println(\"" + printed + "\" + (a.length > 0 ? \" \" + String.join(\" \", a) : \"\")); } }\n");
            assertThat(ToolProvider.getSystemJavaCompiler().run(null, null, null, "-d", src.toString(),
                java.toString())).isZero();
            final byte[] bytes = Files.readAllBytes(src.resolve("AotProbe.class"));
            Files.delete(src.resolve("AotProbe.class"));
            Files.delete(java);
            Files.delete(src);
            return bytes;
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /** A jar a minute old, so that a cache written now is newer. */
    private static void aged(final Path path) throws IOException
    {
        Files.setLastModifiedTime(path, FileTime.from(Instant.now().minusSeconds(60)));
    }

    /** A stand-in cache file in bin (or at {@code where}), stamped for {@code forJar} as scripts/aot-train.sh does. */
    private Path cache(final String name, final Path forJar) throws Exception
    {
        return cache(bin.resolve(name), forJar);
    }

    private static Path cache(final Path where, final Path forJar) throws Exception
    {
        Files.writeString(where, "cache");
        writeStamp(where, forJar);
        return where;
    }

    /** A real cache, made through the launcher (NETREDUCE_AOT_OUTPUT) running {@code command}, and stamped. */
    private Path train(final String name, final Path forJar, final String command) throws Exception
    {
        final Path cache = bin.resolve(name);
        final Result training = run(JAVA_HOME, Map.of("NETREDUCE_AOT_OUTPUT", cache.toString()), command);
        assertThat(training.status()).as(training.out() + training.err()).isZero();
        assertThat(cache).isNotEmptyFile();
        writeStamp(cache, forJar);
        return cache;
    }

    /** CACHE.stamp: the jar's SHA-256, time and size, the cache's time and size (scripts/aot-train.sh's format). */
    private static void writeStamp(final Path cache, final Path forJar) throws Exception
    {
        final String sum = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(forJar)));
        final Process stat = new ProcessBuilder("stat", "--printf", "%.9Y %s ", forJar.toString(), cache.toString()).start();
        final String fields = read(stat.getInputStream());
        assertThat(stat.waitFor(10, TimeUnit.SECONDS)).isTrue();
        Files.writeString(cache.resolveSibling(cache.getFileName() + ".stamp"), sum + " " + fields + "\n");
    }

    private static String mtime(final Path file) throws Exception
    {
        final Process stat = new ProcessBuilder("stat", "-c", "%.9Y", file.toString()).start();
        final String out = read(stat.getInputStream()).strip();
        assertThat(stat.waitFor(10, TimeUnit.SECONDS)).isTrue();
        return out;
    }

    /** A JAVA_HOME whose bin/java says it is 25 and prints its arguments, one a line. */
    private Path fakeJava() throws IOException
    {
        final Path home = dir.resolve("fake-jdk");
        final Path java = Files.createDirectories(home.resolve("bin")).resolve("java");
        Files.writeString(java, """
            #!/bin/sh
            if [ "$1" = -version ]; then echo 'openjdk version "25.0.1" 2025-10-21' >&2; exit 0; fi
            printf '%s\\n' "$@"
            """);
        Files.setPosixFilePermissions(java, PosixFilePermissions.fromString("rwxr-xr-x"));
        return home;
    }

    private List<String> argsOf(final Map<String, String> env, final String... args) throws Exception
    {
        final Result result = run(fakeJava(), env, args);
        assertThat(result.status()).as(result.err()).isZero();
        return List.of(result.out().split("\n"));
    }

    private Result run(final Path javaHome, final Map<String, String> env, final String... args) throws Exception
    {
        final List<String> command = new ArrayList<>(List.of(launcher.toString()));
        command.addAll(List.of(args));
        final ProcessBuilder builder = new ProcessBuilder(command);
        builder.environment().keySet().removeIf(k -> k.startsWith("NETREDUCE_"));
        builder.environment().put("JAVA_HOME", javaHome.toString());
        builder.environment().put("NETREDUCE_WORKER_JAR", workerJar.toString());
        builder.environment().putAll(env);
        return finish(builder.start());
    }

    private static Result finish(final Process process) throws Exception
    {
        final CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> read(process.getErrorStream()));
        final String out = read(process.getInputStream());
        assertThat(process.waitFor(120, TimeUnit.SECONDS)).isTrue();
        return new Result(process.exitValue(), out, err.join());
    }

    private static String read(final InputStream in)
    {
        try
        {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }
}
