package io.netreduce.daemon.capture;

import io.netreduce.controlplane.api.BadRequestException;
import io.netreduce.controlplane.api.CaptureInfo;
import io.netreduce.controlplane.api.CaptureRequest;
import io.netreduce.controlplane.api.ConflictException;
import io.netreduce.controlplane.api.NotFoundException;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.capture.CaptureFileWriter;
import io.netreduce.dataplane.capture.CaptureTap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The API's captures: checks a request (port, file inside the capture directory), creates the file and the tap,
 * has the dataplane install the tap, and runs a {@link CaptureSession} per capture. At most one capture per port
 * and one of drops run at a time. Finished captures stay listed (the newest {@value #FINISHED_KEPT}).
 * <p>
 * Thread-safe: API requests arrive on the HTTP threads.
 */
public final class CaptureManager implements AutoCloseable
{
    /** Finished captures kept for listing. */
    public static final int FINISHED_KEPT = 32;

    private static final Logger LOG = LoggerFactory.getLogger(CaptureManager.class);

    private final DataplaneProxy proxy;
    private final List<String> portNames;
    private final CaptureDirectory directory;
    private final int ringCapacity;
    private final long commandTimeoutMs;
    private final Map<String, CaptureSession> sessions = new LinkedHashMap<>();
    private int nextId = 1;
    private boolean closed;

    /**
     * @param proxy            the dataplane's command queue.
     * @param portNames        the dataplane's ports, by index.
     * @param directory        where capture files may be written (appliance.captureDirectory).
     * @param ringCapacity     bytes of each capture's ring buffer, a power of two.
     * @param commandTimeoutMs how long to wait for the dataplane to install or remove a tap.
     */
    public CaptureManager(
        final DataplaneProxy proxy,
        final List<String> portNames,
        final Path directory,
        final int ringCapacity,
        final long commandTimeoutMs)
    {
        this.proxy = proxy;
        this.portNames = List.copyOf(portNames);
        this.directory = new CaptureDirectory(directory);
        this.ringCapacity = ringCapacity;
        this.commandTimeoutMs = commandTimeoutMs;
    }

    /**
     * Start a capture.
     *
     * @throws BadRequestException if the port does not exist or the file is outside the capture directory.
     * @throws ConflictException   if the port (or drops) is already being captured or the file exists.
     */
    public synchronized CaptureInfo start(final CaptureRequest request)
    {
        if (closed)
        {
            throw new IllegalStateException("the dataplane is shutting down");
        }
        final int port = portIndex(request.port());
        for (final CaptureSession running : sessions.values())
        {
            final CaptureTap tap = running.tap();
            if (running.isRunning() && tap.drops() == request.drops() && (request.drops() || tap.port() == port))
            {
                throw new ConflictException((request.drops() ? "drops are" : "port " + request.port() + " is") +
                    " already being captured by capture " + running.id() + "; stop it first");
            }
        }
        final Path file = directory.resolve(request.file());
        final int tapId = nextId++;
        final CaptureTap tap = request.drops() ? CaptureTap.forDrops(tapId, port, ringCapacity) :
            CaptureTap.forPort(tapId, port, ringCapacity);
        final CaptureFileWriter writer;
        try
        {
            writer = CaptureFileWriter.create(file, tap, portNames, request.maxPackets());
        }
        catch (final FileAlreadyExistsException ex)
        {
            throw new ConflictException(ex.getFile() + " exists; captures never replace a file");
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("cannot create " + file + ": " + ex.getMessage(), ex);
        }
        try
        {
            proxy.startCapture(tap).get(commandTimeoutMs, TimeUnit.MILLISECONDS);
        }
        catch (final ExecutionException | TimeoutException | InterruptedException ex)
        {
            discard(writer);
            if (ex instanceof InterruptedException)
            {
                Thread.currentThread().interrupt();
            }
            if (ex instanceof TimeoutException)
            {
                // The command may still be applied later: make sure the tap does not stay behind.
                proxy.stopCapture(tapId);
                throw new IllegalStateException("the dataplane did not install the capture within " +
                    commandTimeoutMs + " ms");
            }
            final Throwable cause = ex.getCause() == null ? ex : ex.getCause();
            throw cause instanceof IllegalArgumentException ? new ConflictException(cause.getMessage()) :
                new IllegalStateException("starting the capture: " + cause.getMessage(), cause);
        }
        final CaptureSession session = new CaptureSession(Integer.toString(tapId), request.port(), tap, writer, proxy,
            request.maxPackets(), commandTimeoutMs);
        sessions.put(session.id(), session);
        session.start();
        pruneFinished();
        LOG.info("capture {} started: {} -> {}{}", session.id(),
            request.drops() ? "drops" + (request.port() == null ? "" : " on port " + request.port()) :
                "port " + request.port(),
            file, request.maxPackets() > 0 ? " (at most " + request.maxPackets() + " frames)" : "");
        return session.info();
    }

    /**
     * Stop a capture (a finished one is reported as it ended) and wait until its file is closed.
     *
     * @throws NotFoundException if there is no such capture.
     */
    public CaptureInfo stop(final String id)
    {
        final CaptureSession session;
        synchronized (this)
        {
            session = sessions.get(id);
        }
        if (session == null)
        {
            throw new NotFoundException("no capture '" + id + "'");
        }
        awaitStopped(session);
        return session.info();
    }

    /**
     * @return the running captures and the recently finished ones, oldest first.
     */
    public synchronized List<CaptureInfo> list()
    {
        final List<CaptureInfo> infos = new ArrayList<>();
        sessions.values().forEach(session -> infos.add(session.info()));
        return infos;
    }

    /**
     * Stop every running capture (before the dataplane stops, so their taps are removed cleanly).
     */
    @Override
    public void close()
    {
        final List<CaptureSession> running;
        synchronized (this)
        {
            closed = true;
            running = sessions.values().stream().filter(CaptureSession::isRunning).toList();
        }
        running.forEach(this::awaitStopped);
    }

    private void awaitStopped(final CaptureSession session)
    {
        try
        {
            if (!session.stop(2 * commandTimeoutMs))
            {
                LOG.warn("capture {} did not finish within {} ms", session.id(), 2 * commandTimeoutMs);
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    private int portIndex(final String port)
    {
        if (port == null)
        {
            return CaptureTap.ANY_PORT;
        }
        final int index = portNames.indexOf(port);
        if (index < 0)
        {
            throw new BadRequestException("no port '" + port + "'; the appliance's ports are " +
                String.join(", ", portNames));
        }
        return index;
    }

    private void pruneFinished()
    {
        long finished = sessions.values().stream().filter(session -> !session.isRunning()).count();
        final Iterator<CaptureSession> oldestFirst = sessions.values().iterator();
        while (finished > FINISHED_KEPT && oldestFirst.hasNext())
        {
            if (!oldestFirst.next().isRunning())
            {
                oldestFirst.remove();
                finished--;
            }
        }
    }

    private static void discard(final CaptureFileWriter writer)
    {
        try
        {
            writer.close();
            Files.deleteIfExists(writer.file());
            if (writer.reasonsFile() != null)
            {
                Files.deleteIfExists(writer.reasonsFile());
            }
        }
        catch (final IOException ex)
        {
            LOG.warn("removing the unused capture file {}: {}", writer.file(), ex.toString());
        }
    }
}
