package io.netreduce.daemon.capture;

import io.netreduce.controlplane.api.CaptureInfo;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.capture.CaptureFileWriter;
import io.netreduce.dataplane.capture.CaptureTap;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One running capture: its tap is installed in the dataplane, and its own writer thread drains the tap's ring
 * into the file until asked to stop or the maximum is written. The writer thread then removes the tap through the
 * dataplane's command queue, writes what is left in the ring (nothing more can arrive once the dataplane has
 * confirmed) and closes the file, so the end of a capture has one owner whoever asked for it.
 */
final class CaptureSession
{
    private static final Logger LOG = LoggerFactory.getLogger(CaptureSession.class);
    private static final int DRAIN_LIMIT = 256;

    private final String id;
    private final String port;
    private final CaptureTap tap;
    private final CaptureFileWriter writer;
    private final DataplaneProxy proxy;
    private final long maxPackets;
    private final long commandTimeoutMs;
    private final Thread thread;
    private final CountDownLatch finished = new CountDownLatch(1);
    private volatile boolean stopRequested;
    private volatile boolean running = true;
    private volatile long written;
    private volatile String error;

    /**
     * @param port the port name captured (or whose drops are captured), or null for drops of every port.
     */
    CaptureSession(
        final String id,
        final String port,
        final CaptureTap tap,
        final CaptureFileWriter writer,
        final DataplaneProxy proxy,
        final long maxPackets,
        final long commandTimeoutMs)
    {
        this.id = id;
        this.port = port;
        this.tap = tap;
        this.writer = writer;
        this.proxy = proxy;
        this.maxPackets = maxPackets;
        this.commandTimeoutMs = commandTimeoutMs;
        this.thread = new Thread(this::run, "netreduce-capture-" + id);
        this.thread.setDaemon(true);
    }

    /**
     * Start the writer thread (the tap is already installed).
     */
    void start()
    {
        thread.start();
    }

    String id()
    {
        return id;
    }

    CaptureTap tap()
    {
        return tap;
    }

    boolean isRunning()
    {
        return running;
    }

    /**
     * Ask the writer to end the capture and wait until it has.
     *
     * @return true if it ended within the timeout.
     */
    boolean stop(final long timeoutMs) throws InterruptedException
    {
        stopRequested = true;
        return finished.await(timeoutMs, TimeUnit.MILLISECONDS);
    }

    CaptureInfo info()
    {
        return new CaptureInfo(id, port, tap.drops(), writer.file().toString(), written, running, tap.lost(),
            maxPackets, writer.reasonsFile() == null ? null : writer.reasonsFile().toString(), error);
    }

    private void run()
    {
        final IdleStrategy idle = new BackoffIdleStrategy(1, 1, 1_000, 1_000_000);
        String ending = "stopped";
        try
        {
            while (!stopRequested && !writer.limitReached() && writer.failure() == null)
            {
                final int records = writer.drain(tap, DRAIN_LIMIT);
                written = writer.written();
                idle.idle(records);
            }
            if (writer.limitReached())
            {
                ending = "maximum of " + maxPackets + " frames written";
            }
            if (removeTap())
            {
                writer.drainAll(tap);
            }
            if (writer.failure() != null)
            {
                error = "writing " + writer.file() + " failed: " + writer.failure().getMessage();
            }
        }
        catch (final RuntimeException ex)
        {
            error = "capture writer failed: " + ex;
            LOG.error("capture {}: writer failed", id, ex);
        }
        finally
        {
            try
            {
                writer.close();
            }
            catch (final IOException ex)
            {
                error = error == null ? "closing " + writer.file() + " failed: " + ex.getMessage() : error;
            }
            written = writer.written();
            running = false;
            finished.countDown();
        }
        if (error != null)
        {
            LOG.warn("capture {} ended: {}; {} frames written to {}, {} lost", id, error, written, writer.file(),
                tap.lost());
        }
        else
        {
            LOG.info("capture {} ended ({}): {} frames written to {}, {} lost", id, ending, written, writer.file(),
                tap.lost());
        }
    }

    private boolean removeTap()
    {
        try
        {
            proxy.stopCapture(tap.id()).get(commandTimeoutMs, TimeUnit.MILLISECONDS);
            return true;
        }
        catch (final ExecutionException ex)
        {
            error = "the dataplane did not remove the tap: " + ex.getCause().getMessage();
        }
        catch (final TimeoutException ex)
        {
            error = "the dataplane did not remove the tap within " + commandTimeoutMs + " ms";
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            error = "interrupted while removing the tap";
        }
        return false;
    }
}
