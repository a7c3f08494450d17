from gpuorch.cli import main

main()
