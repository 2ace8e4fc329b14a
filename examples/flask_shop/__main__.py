from examples.flask_shop.app import main

main()
