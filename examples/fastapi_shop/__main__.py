from examples.fastapi_shop.app import main

main()
