from gpuorch.console import main

main()
