fn main() -> std::process::ExitCode {
    driftless::cli::main()
}
