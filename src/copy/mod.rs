//! The one copy driver: prepare → open the ends → plan → run (as a stream
//! of records, or by position) → close → report.
//!
//! Every copy goes through [`run`], whatever its ends and options. It
//! returns `Ok` when the copy did its job (exit status 0, or 2 for a
//! rescue that ran its course with bad areas left: [`Finished`]) and a
//! [`Failure`] otherwise, which the command line prints (if anything is
//! left to print) and turns into exit status 1. GNU's order is kept
//! throughout: the input is opened before the output, nothing is opened
//! for writing before every check has passed, both ends are closed before
//! the statistics, and what ddx's own options add comes after them.

mod extras;
mod failure;
mod images;
mod indexed;
mod objects;
mod positional;
mod read_back;
mod resumed;
mod safety;
mod verbose;

pub use failure::Failure;
pub use verbose::expected_bytes;

use std::sync::Arc;

use crate::diagnostic::{Diagnostic, Events, Refusal};
use crate::ends::{self, Whence};
use crate::engine::stream::{Input, Output, Stream};
use crate::engine::{self, Counters, RunResult};
use crate::operands::{CopyPlan, StatusLevel};
use crate::planner::{self, OutputProbe, Strategy};
use crate::progress::{Reporter, Ticker};
use crate::request::Request;
use crate::sys::signals::SignalPipes;

/// How a copy that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Every byte copied.
    Complete,
    /// A rescue ran every phase and pass it was given, and bad areas
    /// remain: listed after the statistics, '-' in the map.
    BadAreasRemain,
}

/// What the driver needs beyond the request: how ddx was invoked, and
/// the signal handlers installed at start.
pub struct Context {
    /// argv[0], as GNU names itself in messages.
    pub program: String,
    pub signals: SignalPipes,
    /// The whole command line, for the map's header.
    pub command_line: String,
}

/// What the ways of running share.
#[derive(Clone, Copy)]
struct Copying<'a> {
    plan: &'a CopyPlan,
    counters: &'a Counters,
    reporter: &'a Reporter,
    command_line: &'a str,
    /// What identifies the input, for a map to record.
    input_record: Option<&'a crate::rescue::identity::EndRecord>,
}

/// Run one copy.
pub fn run(mut request: Request, context: Context) -> Result<Finished, Failure> {
    // What ddx's own options cannot be combined with, refused before
    // anything is opened, as the operands are.
    planner::check(&request)?;
    // An upload kept resumable by its map: a resumed one goes on after
    // the parts the map records.
    let upload_map = objects::prepare(&mut request.plan, &request.settings)?;
    let mut extras = extras::prepare(&mut request.plan, &request.settings)?;
    let mut images = images::prepare(&request.plan, &request.settings)?;
    let mut indexed = indexed::prepare(&request)?;
    let extracting = indexed
        .as_ref()
        .is_some_and(|ix| ix.job() == crate::request::IndexJob::Extract);
    if extracting {
        // The blob goes onto the output as an image does, and is checked
        // against the index's ids, not against the stream's digests.
        images.writes_an_image();
        extras.leave_verify_to_the_index();
    }
    let progress_stream = match request.settings.progress_fd {
        Some(fd) => Some((safety::progress_stream(fd)?, fd)),
        None => None,
    };
    // Every further output against the copy's ends and the table (as
    // they stand: nothing is open yet), then to the guard, as of= is. A
    // person is told about (and asked before overwriting) a whole disk
    // once the input is open, with what it holds.
    let tees: Vec<_> = request
        .settings
        .tee
        .iter()
        .map(|path| (path.as_path(), planner::facts::output_facts_at(path)))
        .collect();
    planner::needs::admit_tees(&request, planner::facts::identities(&request.plan), &tees)?;
    let mut whole_disks = Vec::new();
    for output_plan in std::iter::once(request.plan.clone()).chain(images.tee_plans(&request.plan))
    {
        whole_disks.extend(safety::guard(&output_plan, request.settings.force)?);
    }
    if request.settings.used_only && !request.settings.force {
        if let Some(refusal) = crate::guard::source_in_use(&request.plan) {
            return Err(Refusal(refusal.to_string()).into());
        }
    }

    let plan = &request.plan;
    let counters = Arc::new(Counters::default());
    let reporter = Arc::new(Reporter::new(
        &context.program,
        plan.status,
        Arc::clone(&counters),
    ));
    let live_line = plan.status == StatusLevel::Progress && {
        use std::io::IsTerminal;
        std::io::stderr().is_terminal()
    };
    if live_line {
        reporter.use_live_line();
    }
    let json = progress_stream.is_some();
    if let Some((stream, fd)) = progress_stream {
        reporter.use_json(stream, fd);
    }
    let ticker = Ticker::start(
        Arc::clone(&reporter),
        context.signals,
        plan.status == StatusLevel::Progress || json,
        plan.status == StatusLevel::Progress && !live_line,
    );

    // The statistics' time starts before the ends are opened: truncating
    // an existing output waits for any of its pages still being written
    // back, and bs=auto measures the input, and `time ddx` counts both.
    // GNU's clock starts after its opens; ddx's covers everything it waits
    // for, up to the statistics.
    reporter.start_clock();
    let cpu_at_start = crate::sys::usage::cpu_times();
    let mut input = Input::of(ends::open::open_input(
        plan,
        request.settings.passthrough().into(),
    )?);
    if let Some(ix) = indexed.as_mut().filter(|_| extracting) {
        input = ix.wrap_input(input, plan, request.settings.tee.is_empty())?;
    }
    // A map records its copy's input; a resumed copy must read the same.
    let map_path = extras
        .positional
        .as_ref()
        .and_then(|p| p.map_path.as_deref())
        .or_else(|| upload_map.as_ref().map(|u| u.path.as_path()));
    let input_record = map_path.map(|_| resumed::input_record(plan, &input));
    let recorded = extras
        .recorded
        .as_ref()
        .or_else(|| upload_map.as_ref().and_then(|u| u.recorded.as_ref()));
    if let (Some(recorded), Some(map), Some(now)) = (recorded, map_path, &input_record) {
        resumed::check_input(recorded, map, now).map_err(Refusal)?;
    }
    let remote_output = plan
        .output
        .as_deref()
        .and_then(ends::uri::recognise)
        .and_then(Result::ok);
    let output_probe = || match (&plan.output, &remote_output) {
        (Some(_), Some(remote)) => OutputProbe::Uri(remote),
        (Some(path), None) => OutputProbe::Path(path),
        (None, _) => OutputProbe::Stdout,
    };
    // What the input holds, looked at only where an output would take a
    // compressed stream as a disk image (see `planner::needs`).
    let compressed = (planner::needs::copies_input_unasked(&request)
        && planner::needs::input_format_matters(
            &request,
            &planner::facts::output_facts_now(output_probe()),
            &tees,
        ))
    .then(|| {
        let skip = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
        crate::image::peek::compressed_format(input.stream.as_mut(), skip)
    })
    .flatten();
    // `--used-only` reads the disk's maps through the input as opened,
    // which its row of the table must admit first; every other wrapper is
    // planned for, and admitted, as it reads.
    let used_only = request.settings.used_only;
    if !used_only {
        input = images.wrap_input(input, plan)?;
    }
    let seen = planner::facts::Seen {
        format: compressed,
        decoded_size: images.decoded_size(),
    };
    let mut facts = planner::facts::gather(
        &input,
        seen,
        output_probe(),
        planner::Beside {
            map: extras
                .positional
                .as_ref()
                .and_then(|p| p.map_path.as_deref()),
            hash_file: request.settings.hash_file.as_deref(),
            bmap_create: request.settings.bmap_create.as_deref(),
        },
    );
    // Every option against the ends it got, before the output is opened.
    planner::admit(&request, &facts)?;
    planner::needs::admit_room(&request, &facts.input, &tees)?;
    if used_only {
        // A disk without the positions to read used blocks at writes
        // nothing: refused above.
        input = images.wrap_input(input, plan)?;
        facts = facts.used_only_input(&input);
    }
    let flash = planner::needs::compressed_onto(&request, &facts, &tees);
    if flash.is_some() || !whole_disks.is_empty() {
        // A person's think time is not the copy's: the clock and the
        // progress wait for the answer.
        reporter.hold_clock();
        safety::confirm(
            &context.program,
            plan,
            &whole_disks,
            flash.as_ref(),
            request.settings.force,
        )?;
        reporter.start_clock();
    }
    let mut warnings = Vec::new();
    let mut output = match indexed.as_mut().filter(|_| !extracting) {
        Some(ix) => ix.open_output(plan)?,
        None => Output::of(ends::open::open_output(
            plan,
            request.settings.passthrough().into(),
            &mut warnings,
        )?),
    };
    // An output whose size only its opening tells (an export's): held
    // to what the copy writes before the first write.
    if let Some(opened) = facts.output_opened(&output) {
        if let Err(refusal) = planner::needs::admit_opened_room(&request, &facts.input, &opened) {
            output.stream.abandon();
            return Err(refusal.into());
        }
    }
    if let Some(upload) = &upload_map {
        let notes = input_record.as_ref().map_or_else(String::new, |input| {
            crate::rescue::identity::Recorded::notes(
                input,
                Some(&resumed::output_record(plan, &output)),
            )
        });
        keep_upload_map(
            upload,
            plan,
            &input,
            &facts,
            &mut output,
            (&context.command_line, notes),
            &reporter,
        )?;
    }
    let mut output = images.wrap_output(output, plan, &mut warnings)?;
    // The wrapped ends are what the planner plans for.
    let mapped = images.mapped() || indexed.as_ref().is_some_and(|ix| ix.mapped());
    let facts = facts.with_stages(&output, mapped);
    for warning in warnings {
        reporter.diagnostic(warning);
    }
    let block_choice = resolve_auto_block_size(&mut request.plan, &input, &output);
    let plan = &request.plan;
    // A resumed upload goes on after the parts its earlier runs stored:
    // the live line and the JSON records count them, as a copy by
    // position resumed from its map does.
    let resumed = upload_map
        .as_ref()
        .and_then(|upload| upload.resume.as_ref())
        .map(|record| record.source_end());
    reporter
        .set_total(expected_bytes(plan, &input, &facts).map(|left| left + resumed.unwrap_or(0)));
    if let Some(done) = resumed {
        reporter.set_resumed(done);
    }
    if let Some(position) = images.input_position() {
        reporter.set_input_position(position);
    }
    let (tap, hash_job) = match extras.start_hashing()? {
        Some((tap, job)) => (Some(tap), Some(job)),
        None => (None, None),
    };
    let copying = Copying {
        plan,
        counters: &counters,
        reporter: &reporter,
        command_line: &context.command_line,
        input_record: input_record.as_ref(),
    };

    // How the output was closed (what its store said of the bytes it
    // holds), for --verify.
    let closed;
    // A map named but not there: said once nothing refused the copy,
    // before it reads anything.
    // What `--used-only` copies whole, said whatever `--verbose` says.
    if plan.status != StatusLevel::None {
        let notices = [
            &extras.notice,
            &upload_map.as_ref().and_then(|u| u.notice.clone()),
        ];
        for notice in notices.into_iter().flatten() {
            reporter.message(notice);
        }
        for line in images.used_whole() {
            reporter.message(line);
        }
    }
    let (failed, aftermath, report) = match &extras.positional {
        Some(positional) => {
            let (failed, aftermath) = positional::run(
                positional,
                extras.resuming,
                &copying,
                &mut input,
                &mut output,
                tap,
                request.settings.verbose,
            )?;
            let report = request.settings.verbose.then(|| {
                verbose::HowItRan::positional(plan, aftermath.how_it_ran())
                    .with_cpu_since(cpu_at_start)
                    .with_ends(input.stream.describe(), output.stream.describe())
            });
            closed = close(input, output, &copying)?;
            let failed = closed.failed || failed;
            ticker.stop();
            (failed, Some(aftermath), report)
        }
        None => {
            let strategy = planner::plan(&request, &facts);
            let report = request.settings.verbose.then(|| {
                verbose::HowItRan::new(&request.settings, &strategy, plan)
                    .with_devices(&facts)
                    .with_trim(request.settings.trim, output.stream.capabilities().discards)
                    .with_block_choice(block_choice.as_ref())
                    .with_cpu_since(cpu_at_start)
                    .with_ends(input.stream.describe(), output.stream.describe())
            });
            let (failed, input) = stream(strategy, tap, &copying, input, &mut output)?;
            if let Some(input) = input {
                close_input(input)?;
            }
            // The reporter still watches signals while the output is made
            // final: one that comes before an upload's completing request
            // aborts it, one after it waits for its outcome.
            closed = close_output(output, failed, &copying)?;
            let failed = closed.failed;
            ticker.stop();
            (failed, None, report)
        }
    };

    reporter.finish();
    if let Some(signal) = reporter.late_signal() {
        let name = plan.output.as_deref().map_or_else(
            || "standard output".to_owned(),
            |path| crate::text::quote::quote_file(&ends::uri::shown(path)),
        );
        reporter.message(format!(
            "{signal} came once {name} was committed: the copy is complete, not interrupted"
        ));
    }
    // The statistics are out; a signal now ends the read-back at once.
    crate::sys::signals::default_from_now_on();
    let mut failed = failed;
    let mut finished = Finished::Complete;
    if let Some(aftermath) = aftermath {
        match aftermath.report(&reporter) {
            positional::Verdict::Complete => {}
            positional::Verdict::BadAreasRemain => finished = Finished::BadAreasRemain,
            positional::Verdict::Failed => failed = true,
        }
    }
    failed |= images.finish(
        &reporter,
        plan.status,
        counters.snapshot().bytes_out,
        failed,
    );
    if let Some(ix) = &indexed {
        failed |= ix.finish(&reporter, plan.status, failed);
    }
    failed |= extras.finish(
        hash_job,
        plan,
        &images.kept_outputs(),
        request.settings.passthrough(),
        &reporter,
        extras::Ended {
            failed,
            stored_as_written: closed.stored,
            finalised: closed.finalised,
        },
    );
    if let Some(output) = &plan.output {
        let outputs: Vec<_> = std::iter::once(output.clone())
            .chain(images.kept_outputs())
            .collect();
        failed |= images.verify(&reporter, plan, &outputs, counters.snapshot().bytes_out);
        if let Some(ix) = &indexed {
            failed |= ix.verify(
                &reporter,
                plan,
                &outputs,
                request.settings.passthrough(),
                failed,
            );
        }
    }
    if let Some(report) = report {
        report.print(&reporter, &counters);
        images.print_verbose(&reporter);
    }
    if failed || crate::progress::reporter::stderr_failed() {
        Err(Failure::Reported)
    } else {
        Ok(finished)
    }
}

/// `--map` onto an object: the upload records its progress in the map,
/// and a resumed one first checks its recorded parts with the server.
/// The map's extent is the copy's input, which must have a known size.
fn keep_upload_map(
    upload: &objects::UploadMap,
    plan: &CopyPlan,
    input: &Input,
    facts: &planner::Facts,
    output: &mut Output,
    (command_line, notes): (&str, String),
    reporter: &Reporter,
) -> Result<(), Failure> {
    let done = upload.resume.as_ref().map_or(0, |r| r.source_end());
    let Some(left) = expected_bytes(plan, input, facts) else {
        return Err(Refusal(format!(
            "--map: the size of {} is not known, and a resumable upload's map covers the \
             input",
            crate::text::quote::quote_file(&input.name)
        ))
        .into());
    };
    let journal = upload.kept(done + left, command_line, notes);
    output
        .stream
        .keep_journal(Box::new(journal), upload.resume.as_ref())
        .map_err(|errno| {
            let detail = output.stream.take_detail();
            let why = detail.unwrap_or_else(|| crate::sys::errno_text(errno));
            Failure::Refused(Refusal(format!(
                "--resume: {}: {why}; remove the map {} to start over",
                crate::text::quote::quote_file(&output.name),
                crate::text::quote::quote_file(upload.path.as_os_str().as_encoded_bytes())
            )))
        })?;
    // Said once the server confirmed the parts the map records.
    if let Some(record) = &upload.resume {
        if plan.status != crate::operands::StatusLevel::None {
            reporter.message(objects::resume_summary(upload, record, Some(left)));
        }
    }
    Ok(())
}

/// A copy as a stream of records, by the backend the planner chose;
/// returns whether it failed, and the input to close (absent when its
/// reader thread could not be taken back).
fn stream(
    strategy: Strategy,
    tap: Option<crate::integrity::Tap>,
    copying: &Copying<'_>,
    input: Input,
    output: &mut Output,
) -> Result<(bool, Option<Input>), Failure> {
    let input_start = input.offset;
    let plan = Arc::new(copying.plan.clone());
    let mut input = input;
    // The requests each end's window keeps in flight, as planned.
    let total = engine::backend::stream_total(&plan, &input);
    let hint = |in_flight: crate::planner::InFlight| engine::stream::Pipeline {
        chunk: in_flight.request,
        depth: in_flight.depth,
        total,
    };
    if let Some(reads) = strategy.input_in_flight {
        input.stream.pipeline(hint(reads));
    }
    if let Some(writes) = strategy.output_in_flight {
        output.stream.pipeline(hint(writes));
    }
    let how = engine::backend::How {
        backend: strategy.backend,
        shaping: strategy.shaping,
        tap,
    };
    let (result, input) = engine::backend::run(
        how,
        Arc::clone(&plan),
        input,
        output,
        copying.counters,
        copying.reporter,
    );
    let (failed, stopped_short) = match result {
        RunResult::Died => return Err(Failure::Reported),
        RunResult::Finished(outcome) => (outcome.failed, outcome.stopped_short),
    };
    let mut input = input;
    if let (true, Some(input)) = (stopped_short, &mut input) {
        let counted = copying.counters.snapshot();
        input.give_back_read_ahead(
            &plan,
            input_start,
            counted.records_in_full + counted.records_in_partial,
        );
    }
    Ok((failed, input))
}

/// GNU closes both ends before the statistics; a close error ends it
/// there.
fn close(input: Input, output: Output, copying: &Copying<'_>) -> Result<Closed, Failure> {
    close_input(input)?;
    close_output(output, false, copying)
}

fn close_input(input: Input) -> Result<(), Failure> {
    let Input { stream, name, .. } = input;
    stream
        .close()
        .map_err(|errno| Failure::from(Diagnostic::ClosingInput { file: name, errno }))
}

/// How the output was closed.
#[derive(Debug)]
struct Closed {
    /// The copy failed (before the close, or in finalising the output).
    failed: bool,
    /// What the output's store said of the bytes it holds
    /// (`Upload::stored_as_written`).
    stored: Option<Result<String, String>>,
    /// The output was finalised: not an upload aborted or kept for
    /// `--resume`, nor one whose completion failed.
    finalised: bool,
}

/// Close the output; after a `failed` copy, as its end finalises one
/// (an upload is aborted rather than completed). The end is finalised
/// first, so that what it says about that (the server's answer to an
/// upload's completion or abort) is in the message. A failure to
/// finalise (the last writes, an upload's completion) is the copy's,
/// said here, and the statistics still come after it, saying what was
/// read and what is stored; the same failure met again after a failed
/// copy is not said twice. A failure of the close itself ends ddx there,
/// as it ends GNU dd.
fn close_output(output: Output, failed: bool, copying: &Copying<'_>) -> Result<Closed, Failure> {
    let reporter = copying.reporter;
    let Output {
        stream: mut end,
        name,
    } = output;
    let closing = |errno, detail| {
        Diagnostic::ClosingOutput {
            file: name.clone(),
            errno,
        }
        .explained(detail)
    };
    // Where the copy's writes end in the output, before it is finalised.
    let reached = end.seek(Whence::Current(0)).ok();
    if let Err(errno) = end.finalise(failed) {
        let detail = end.take_detail();
        if !failed {
            count_stored(&*end, reached, copying);
        }
        end.abandon();
        if !detail.as_deref().is_some_and(|d| reporter.said_detail(d)) {
            reporter.diagnostic(closing(errno, detail));
        }
        return Ok(Closed {
            failed: true,
            stored: None,
            finalised: false,
        });
    }
    let stored = end.stored_as_written();
    let closed = if failed {
        end.close_failed()
    } else {
        end.close()
    };
    closed.map_err(|errno| Failure::from(closing(errno, None)))?;
    Ok(Closed {
        failed,
        stored,
        finalised: true,
    })
}

/// After the output of a copy that did not fail otherwise failed to
/// finalise (its last writes, an upload's parts, failed behind the
/// copy; a failure met while writing was counted then): the bytes out are those the output
/// stores, `reached` being where the copy's writes ended in it (None: a
/// stream that counts from its own first byte, a compressor's). The
/// records in stay what was read.
fn count_stored(end: &dyn Stream, reached: Option<u64>, copying: &Copying<'_>) {
    use std::sync::atomic::Ordering::{AcqRel, Release};
    let Some(until) = end.written_until() else {
        return;
    };
    let counters = copying.counters;
    let out = counters
        .bytes_out
        .load(std::sync::atomic::Ordering::Acquire);
    let lost = match reached {
        Some(reached) => reached.saturating_sub(until),
        None => out.saturating_sub(until),
    };
    if lost == 0 {
        return;
    }
    let stored = out.saturating_sub(lost);
    let block = copying.plan.output_block_size.max(1) as u64;
    counters.bytes_out.fetch_min(stored, AcqRel);
    counters.records_out_full.store(stored / block, Release);
    counters
        .records_out_partial
        .store(u64::from(stored % block != 0), Release);
}

/// bs=auto: measure now that both ends are open (the probe only reads).
fn resolve_auto_block_size(
    plan: &mut CopyPlan,
    input: &Input,
    output: &Output,
) -> Option<engine::auto_block::Choice> {
    use crate::operands::IoFlags;
    if !plan.auto_block_size {
        return None;
    }
    let (Some(input_fd), Some(output_fd)) = (input.stream.fd(), output.stream.fd()) else {
        *plan = plan.clone().with_block_size(engine::auto_block::UNMEASURED);
        return None;
    };
    let here = crate::sys::file::current_offset(input_fd).unwrap_or(0);
    let skip = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
    let choice = engine::auto_block::choose(
        engine::auto_block::ProbeEnd {
            fd: input_fd,
            direct: plan.input_flags.contains(IoFlags::DIRECT),
            can: input.stream.capabilities(),
        },
        engine::auto_block::ProbeEnd {
            fd: output_fd,
            direct: plan.output_flags.contains(IoFlags::DIRECT),
            can: output.stream.capabilities(),
        },
        here.max(0) as u64 + skip,
    );
    *plan = plan.clone().with_block_size(choice.block_size);
    Some(choice)
}
